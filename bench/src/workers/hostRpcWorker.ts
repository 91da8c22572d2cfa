// The calling side of the `host` suite: a worker that makes `n` host calls one after the other
// over `port`, the way a subagent's tool asks its supervisor for an approval, and reports each
// round trip in µs. Modes: `raw` (a bare postMessage echo, the floor), `troupe` (Troupe's host
// protocol: a checked tuple with a capability), `comlink` and `comlink-filtered` (a comlink proxy,
// without and with an endpoint on the serving side that passes only the one named call).
import { type MessagePort, parentPort, workerData } from 'node:worker_threads';
import { HostOp, parseHostReply } from '@troupe/core/internal';
import * as Comlink from 'comlink';
import { nodeEndpoint } from './comlinkNode.js';

interface Data {
  readonly port: MessagePort;
  readonly mode: 'raw' | 'troupe' | 'comlink' | 'comlink-filtered';
  readonly warmup: number;
  readonly n: number;
}

const { port, mode, warmup, n } = workerData as Data;
const payload = { toolName: 'refund', toolCallId: 'call_0_1', arguments: { order: 'A-1', amount: 42 } };
const capability = '0123456789abcdefghijklmn';
const now = (): number => Number(process.hrtime.bigint()) / 1000;

function caller(): () => Promise<unknown> {
  if (mode === 'raw' || mode === 'troupe') {
    const pending = new Map<number, (value: unknown) => void>();
    let seq = 0;
    port.on('message', (raw: unknown) => {
      if (mode === 'raw') {
        const [s, value] = raw as [number, unknown];
        pending.get(s)?.(value);
        pending.delete(s);
        return;
      }
      const reply = parseHostReply(raw);
      if (reply === undefined) return;
      pending.get(reply.seq)?.(reply.value);
      pending.delete(reply.seq);
    });
    return () =>
      new Promise((resolve) => {
        const s = ++seq;
        pending.set(s, resolve);
        port.postMessage(mode === 'raw' ? [s, payload] : [HostOp.approve, s, capability, payload]);
      });
  }
  const api = Comlink.wrap<{ approve(request: typeof payload): { decision: string } }>(nodeEndpoint(port));
  return () => api.approve(payload) as Promise<unknown>;
}

const call = caller();
// Whether the channel serves a property read (comlink unfiltered does: `GET ['approve', 'name']`).
let servesGet = false;
if (mode === 'comlink' || mode === 'comlink-filtered') {
  const proxy = Comlink.wrap<{ approve: { name: string } }>(nodeEndpoint(port)) as unknown as {
    approve: { name: PromiseLike<string> };
  };
  servesGet = await Promise.resolve(proxy.approve.name).then(
    (v) => v === 'approve',
    () => false,
  );
}
for (let i = 0; i < warmup; i++) await call();
const times = new Float64Array(n);
for (let i = 0; i < n; i++) {
  const t = now();
  await call();
  times[i] = now() - t;
}
parentPort?.postMessage({ times, servesGet });
