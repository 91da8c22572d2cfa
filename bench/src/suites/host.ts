// Issue 11: what the host channel costs. A subagent's call to its supervisor (here: an approval)
// as one round trip between a worker and this thread, four ways: a bare postMessage echo (the
// floor), Troupe's own host protocol (a tuple [op, seq, capability, payload]: the call parsed,
// its capability looked up, its payload checked against the approval schema), comlink as it was
// used before (it serves any property path of the object it exposes), and comlink behind an
// endpoint that passes only an APPLY of the one named operation with checked arguments (what
// comlink would need to serve only its calls). Medians of one call after another.
import { MessageChannel, type MessagePort, Worker } from 'node:worker_threads';
import { HostApprovalRequest, parseHostCall } from '@troupe/core/internal';
import * as Comlink from 'comlink';
import type { Figure, SuiteBody } from '../Suite.js';
import { quantile, round } from '../stats.js';
import { nodeEndpoint } from '../workers/comlinkNode.js';

type Mode = 'raw' | 'troupe' | 'comlink' | 'comlink-filtered';
const WORKER = new URL('../workers/hostRpcWorker.js', import.meta.url);
const CAPABILITY = '0123456789abcdefghijklmn';
const DECISION = Object.freeze({ decision: 'approve' });

// The serving side of each mode, on this thread.
function serve(mode: Mode, port: MessagePort): void {
  if (mode === 'raw') {
    port.on('message', (m: [number, unknown]) => port.postMessage([m[0], DECISION]));
    return;
  }
  if (mode === 'troupe') {
    const runs = new Map([[CAPABILITY, { agentId: 'agent-1' }]]);
    port.on('message', (raw: unknown) => {
      const call = parseHostCall(raw);
      if (typeof call === 'string') throw new Error(`host bench: the worker's call was refused: ${call}`);
      if (runs.get(call.capability) === undefined || !HostApprovalRequest.safeParse(call.payload).success) {
        port.postMessage([call.seq, 0, { code: 'ERR_HOST_REFUSED' }]);
        return;
      }
      port.postMessage([call.seq, 1, DECISION]);
    });
    return;
  }
  const exposed = { approve: () => DECISION };
  const endpoint = nodeEndpoint(port);
  if (mode === 'comlink') {
    Comlink.expose(exposed, endpoint);
    return;
  }
  // Only `APPLY ['approve']` whose one argument is an approval request reaches comlink; every
  // other message (GET, SET, CONSTRUCT, ENDPOINT, another path) is answered with a refusal.
  type Listener = (event: { data: unknown }) => void;
  const inner = endpoint as unknown as {
    postMessage(message: unknown, transfer?: unknown[]): void;
    addEventListener(type: string, listener: Listener): void;
    removeEventListener(type: string, listener: Listener): void;
  };
  const filtered = {
    postMessage: (message: unknown, transfer?: unknown[]) => inner.postMessage(message, transfer),
    addEventListener: (type: string, listener: Listener) => {
      inner.addEventListener(type, (event) => {
        const m = event.data as {
          id?: string;
          type?: string;
          path?: unknown[];
          argumentList?: { type?: string; value?: unknown }[];
        };
        const args = m.argumentList;
        const ok =
          m.type === 'APPLY' &&
          Array.isArray(m.path) &&
          m.path.length === 1 &&
          m.path[0] === 'approve' &&
          Array.isArray(args) &&
          args.length === 1 &&
          args[0]?.type === 'RAW' &&
          HostApprovalRequest.safeParse(args[0].value).success;
        if (ok) listener(event);
        else
          inner.postMessage({ id: m.id, type: 'HANDLER', name: 'throw', value: { isError: true, value: 'refused' } });
      });
    },
    removeEventListener: (type: string, listener: Listener) => inner.removeEventListener(type, listener),
  } as unknown as Comlink.Endpoint;
  Comlink.expose(exposed, filtered);
}

async function measure(mode: Mode, warmup: number, n: number): Promise<{ times: Float64Array; servesGet: boolean }> {
  const { port1, port2 } = new MessageChannel();
  serve(mode, port1);
  const worker = new Worker(WORKER, { workerData: { port: port2, mode, warmup, n }, transferList: [port2] });
  const result = await new Promise<{ times: Float64Array; servesGet: boolean }>((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  await worker.terminate();
  port1.close();
  return result;
}

export const hostSuite: SuiteBody = {
  async run({ quick, placement, progress }) {
    const n = quick ? 3_000 : 20_000;
    const warmup = quick ? 1_000 : 5_000;
    const modes: Mode[] = ['raw', 'troupe', 'comlink', 'comlink-filtered'];
    // Interleaved blocks, so a change of the machine's load falls on every mode alike.
    const samples = new Map<Mode, number[]>(modes.map((m) => [m, []]));
    const servesGet = new Map<Mode, boolean>();
    const blocks = 3;
    for (let b = 0; b < blocks; b++) {
      for (const mode of modes) {
        progress(`host: ${mode} block ${b + 1}/${blocks}`);
        const { times, servesGet: get } = await measure(mode, warmup, Math.round(n / blocks));
        (samples.get(mode) as number[]).push(...times);
        servesGet.set(mode, get);
      }
    }
    const median = (m: Mode) => quantile(samples.get(m) as number[], 0.5);
    const p95 = (m: Mode) => quantile(samples.get(m) as number[], 0.95);
    const raw = median('raw');
    const figure = (name: string, mode: Mode, what: string): Figure => ({
      suite: 'host',
      name,
      value: round(median(mode)),
      unit: 'µs',
      placement,
      baseline: { name: 'a bare postMessage echo between the same threads (µs, median)', value: round(raw) },
      ratio: round(median(mode) / raw),
      detail: {
        p95_us: round(p95(mode)),
        samples: (samples.get(mode) as number[]).length,
        ...(servesGet.has(mode) ? { serves_property_get: servesGet.get(mode) ? 'yes' : 'no' } : {}),
        what,
      },
    });
    return [
      figure(
        'host.rpc_us.troupe',
        'troupe',
        "Troupe's host protocol: a tuple, its capability looked up, its payload schema-checked",
      ),
      figure(
        'host.rpc_us.comlink',
        'comlink',
        'comlink 4.4.2 as used before: serves any property path of what it exposes',
      ),
      figure(
        'host.rpc_us.comlink_filtered',
        'comlink-filtered',
        'comlink behind an endpoint that passes only APPLY of the named operation with checked arguments',
      ),
    ];
  },
};
