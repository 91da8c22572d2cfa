// The host channel under fuzz: a real worker posts 12,000 generated messages
// of every shape (plus known-good calls) on a real MessagePort into the
// supervisor's HostChannel. The channel's recycle callback here only counts
// (in a supervisor it terminates the thread, after which nothing more of the
// thread is read), so every message is parsed. Every message ends served or
// refused, exactly once; every call that asked a reply gets one; nothing
// throws; no object on this thread changes.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MessageChannel, Worker } from 'node:worker_threads';
import { TroupeError } from '@troupe/core';
import {
  decodeSubagentResult,
  encodeError,
  HostApprovalRequest,
  type HostCheckpoint,
  type HostEvent,
  KeptScopes,
  parseHostCheckpoint,
  TELEMETRY_EVENTS,
} from '@troupe/core/internal';
import { systemClock } from '@troupe/subagent';
import { CancellationTable, HostChannel, type HostRefusal, type ThreadInfo } from '@troupe/supervisor/internal';
import type { FuzzReport } from './channelFuzzWorker.js';
import { processFaults } from './hostileSupervisor.js';

const CAP = 'LIVEcapabilityLIVEcapabi';
const STALE = 'STALEcapabilitySTALEcapa';
const COUNT = 12_000;

function once<T>(worker: Worker, match: (m: unknown) => m is T): Promise<T> {
  return new Promise((resolve, reject) => {
    const on = (m: unknown) => {
      if (!match(m)) return;
      worker.off('message', on);
      resolve(m);
    };
    worker.on('message', on);
    worker.once('error', reject);
  });
}

describe('HostChannel fuzz', () => {
  it(`refuses or serves each of ${COUNT} generated messages exactly once, and replies to every call`, async () => {
    const faultsBefore = processFaults.uncaught.length + processFaults.unhandled.length;
    const served = { approve: 0, task: 0, events: 0, holding: 0, checkpoint: 0 };
    const approved = new Set<string>();
    const markers = new Set<string>();
    const refusals: HostRefusal[] = [];
    // What a handler saw that it should never have been given (asserted at the end: an
    // assertion thrown inside an async handler would only become the worker's reply).
    const wrong: string[] = [];
    let recycles = 0;
    let processed = 0;
    let target = Number.POSITIVE_INFINITY;
    let allProcessed: () => void = () => {};
    const settled = new Promise<void>((resolve) => {
      allProcessed = resolve;
    });
    const tick = () => {
      if (++processed >= target) allProcessed();
    };
    const run = {
      agentId: 'agent_fuzz',
      runId: 'run_fuzz',
      approve: async (request: HostApprovalRequest) => {
        served.approve++;
        tick();
        if (!HostApprovalRequest.safeParse(request).success) wrong.push(`approval ${JSON.stringify(request)}`);
        approved.add(request.toolCallId);
        return { decision: 'reject', reason: 'fuzz' };
      },
      task: async () => {
        served.task++;
        tick();
        return {
          status: 'error' as const,
          error: encodeError(new TroupeError('no subagents here', { code: 'ERR_UNKNOWN_AGENT' })),
          events: [],
        };
      },
      events: (events: readonly HostEvent[]) => {
        served.events++;
        tick();
        for (const e of events) {
          if (e[0] !== 't' && e[0] !== 'd' && e[0] !== 'q') wrong.push(`event kind ${String(e[0])}`);
          if (e[0] === 't') {
            if (!TELEMETRY_EVENTS.has(e[1])) wrong.push(`telemetry ${e[1]}`);
            const marker = (e[2] as { marker?: unknown }).marker;
            if (typeof marker === 'string') markers.add(marker);
          }
        }
      },
      checkpoint: async (checkpoint: HostCheckpoint) => {
        served.checkpoint++;
        tick();
        if (parseHostCheckpoint(checkpoint) !== checkpoint) wrong.push(`checkpoint ${JSON.stringify(checkpoint)}`);
        return true;
      },
      holding: (raw: unknown) => {
        const error = decodeSubagentResult(raw).error;
        // A malformed one is refused by the channel (and counted there).
        if (error === undefined) {
          served.holding++;
          tick();
        }
        return error;
      },
    };
    const channel = new HostChannel({
      clock: systemClock,
      // Every thread is one run here: the live capability is served, the stale one known as ended.
      lookup: (capability) =>
        capability === CAP
          ? { kind: 'run', run }
          : capability === STALE
            ? { kind: 'stale', agentId: 'agent_old', runId: 'run_old', quiet: false }
            : { kind: 'unknown' },
      recycle: () => {
        recycles++;
      },
      refused: (refusal) => {
        refusals.push(refusal);
        tick();
      },
      // The parser is what is fuzzed here (the flood limit has its own tests).
      floodLimit: Number.MAX_SAFE_INTEGER,
    });
    const { port1, port2 } = new MessageChannel();
    const worker = new Worker(new URL('./channelFuzzWorker.js', import.meta.url), {
      workerData: { port: port2, capability: CAP, stale: STALE, seed: 0x5eed, count: COUNT },
      transferList: [port2],
    });
    const table = new CancellationTable();
    const thread: ThreadInfo = {
      id: worker.threadId,
      worker,
      segment: table.segment(worker.threadId),
      bufferSent: false,
      keptScopes: new KeptScopes(),
      sentScope: 0,
      port: port1,
      serveHost: undefined,
      recycled: undefined,
      exitCode: undefined,
      error: undefined,
      exited: new Promise((resolve) => worker.once('exit', resolve)),
      floodCount: 0,
      floodStart: 0,
      lastRead: undefined,
      lastReading: undefined,
    };
    channel.bind(thread, port1);
    try {
      const report = await once(worker, (m): m is FuzzReport => typeof m === 'object' && m !== null && 'sent' in m);
      assert.ok(report.sent >= 10_000, `${report.sent} messages posted`);
      target = report.sent;
      if (processed >= target) allProcessed();
      await settled;
      assert.equal(processed, report.sent, 'each message was served or refused, once');
      assert.deepEqual(wrong, []);
      worker.postMessage('replies?');
      const { replies } = await once(
        worker,
        (m): m is { replies: number } => typeof m === 'object' && m !== null && 'replies' in m,
      );
      assert.equal(replies, report.expectReplies, 'every call that asked for a reply got one');
      // What had to be served was.
      for (const id of report.approvals) assert.ok(approved.has(id), `approval ${id} was served`);
      for (const id of report.markers) assert.ok(markers.has(id), `event ${id} was served`);
      // And most of the rest was refused, each refusal counted and reported.
      assert.equal(channel.refusals, refusals.length);
      assert.ok(refusals.length > report.sent / 3, `${refusals.length} refusals`);
      assert.equal(recycles, refusals.filter((r) => r.recycled).length);
      for (const r of refusals) assert.equal(r.threadId, worker.threadId);
      for (const proto of [Object.prototype, Array.prototype, Function.prototype]) {
        assert.equal(Object.hasOwn(proto, 'polluted'), false);
        assert.equal(Object.getOwnPropertyNames(proto).includes('then'), false);
      }
      assert.equal(processFaults.uncaught.length + processFaults.unhandled.length, faultsBefore);
      // Figures for the report.
      console.log(
        `channel fuzz: ${report.sent} posted (${report.unsendable} not cloneable), served ${JSON.stringify(served)}, refused ${refusals.length}, replies ${replies}`,
      );
    } finally {
      port1.close();
      await worker.terminate();
    }
  });
});
