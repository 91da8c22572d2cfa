// Issue 31, item 1: what a hostile worker can do to its supervisor's thread with messages it is
// allowed to send. A subagent holding its own, valid capability posts 20,000 checkpoints of its
// run (2 KB of state, a fresh call id each) without awaiting the replies, under the flood limit;
// the same 20,000 messages as telemetry events are the baseline, and an honest run of the same
// agents (no flood) the floor. Measured: the longest stall of this thread's event loop while
// the flood is served (`monitorEventLoopDelay`, 1 ms resolution), and how long
// `close({ timeoutMs: 100 })` takes when called while the flood is on its way (its bound is the
// timeout plus the pool's grace period). Real worker threads, real SQLite in a temp directory.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { sqlitePersistence } from '@troupe/sqlite';
import { createSupervisor, type Supervisor } from '@troupe/supervisor';
import { type FloodOrders, floodDesk } from '../agents/flooder.js';
import type { Figure, SuiteBody } from '../Suite.js';
import { median, round } from '../stats.js';

const FLOOD = 20_000;
const BYTES = 2048;
const CLOSE_TIMEOUT_MS = 100;
const GRACE_MS = 500;
const scope = Object.freeze({ tenant: 'bench' });
const tenantKey = (s: unknown) => (s as { tenant: string }).tenant;

/** A supervisor on a fresh SQLite file, one worker thread; `done` closes it and removes the file. */
async function open(): Promise<{ supervisor: Supervisor; done: () => Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), 'troupe-bench-hostile-'));
  const supervisor = createSupervisor({
    persistence: sqlitePersistence({ file: join(dir, 'troupe.sqlite'), tenantKey }),
    pool: { threads: 1, graceMs: GRACE_MS },
  });
  await supervisor.ready();
  return {
    supervisor,
    done: async () => {
      await supervisor.close({ timeoutMs: CLOSE_TIMEOUT_MS });
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Resolves once `n` events `agent.turn` of the subagent (the flood's) have been served. */
function served(supervisor: Supervisor, n: number): Promise<void> {
  let seen = 0;
  return new Promise((resolve) => {
    const on = (e: { agentId: string }) => {
      if (e.agentId.includes('-sub-') && ++seen === n) {
        supervisor.off('agent.turn', on as never);
        resolve();
      }
    };
    supervisor.on('agent.turn', on as never);
  });
}

/**
 * The longest stall of this thread's loop (ms) from the start of the flooding tool (its start
 * event precedes its messages on the port) to the end of their serving: the desk's reply (the
 * checkpoints' thread is recycled at the second one), and for the events every one delivered.
 */
async function stall(kind: FloodOrders['kind']): Promise<number> {
  const { supervisor, done } = await open();
  try {
    const desk = await supervisor.startAgent(floodDesk, { scope, agentId: `stall-${kind}` });
    const orders: FloodOrders = { kind, count: FLOOD, bytes: BYTES, hold: false };
    const all = kind === 'events' ? served(supervisor, FLOOD) : Promise.resolve();
    const h = monitorEventLoopDelay({ resolution: 1 });
    const start = (e: { toolName: string }) => {
      if (e.toolName === 'flood') h.enable();
    };
    supervisor.on('tool.execute.start', start);
    const reply = await desk.send(JSON.stringify(orders));
    await all;
    h.disable();
    if (reply.status !== 'done') throw new Error(`hostile bench: the desk's message ended ${reply.status}`);
    return h.max / 1e6;
  } finally {
    await done();
  }
}

/** Milliseconds `close({ timeoutMs })` takes when called as the flood's tool starts (it holds its thread). */
async function closeUnder(kind: FloodOrders['kind']): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'troupe-bench-hostile-'));
  const supervisor = createSupervisor({
    persistence: sqlitePersistence({ file: join(dir, 'troupe.sqlite'), tenantKey }),
    pool: { threads: 1, graceMs: GRACE_MS },
  });
  try {
    await supervisor.ready();
    const desk = await supervisor.startAgent(floodDesk, { scope, agentId: `close-${kind}` });
    const started = new Promise<void>((resolve) => {
      supervisor.on('tool.execute.start', (e) => {
        if (e.toolName === 'flood') resolve();
      });
    });
    const orders: FloodOrders = { kind, count: FLOOD, bytes: BYTES, hold: true };
    const reply = desk.send(JSON.stringify(orders)).catch(() => undefined);
    await started;
    const t0 = performance.now();
    await supervisor.close({ timeoutMs: CLOSE_TIMEOUT_MS });
    const ms = performance.now() - t0;
    await reply;
    return ms;
  } finally {
    await supervisor.destroy();
    rmSync(dir, { recursive: true, force: true });
  }
}

export const hostileSuite: SuiteBody = {
  async run({ quick, progress }) {
    const rounds = quick ? 2 : 5;
    const stalls = { none: [] as number[], events: [] as number[], checkpoint: [] as number[] };
    const closes = { none: [] as number[], events: [] as number[], checkpoint: [] as number[] };
    for (let r = 0; r < rounds; r++) {
      // Interleaved: every kind sees the same machine.
      for (const kind of ['none', 'events', 'checkpoint'] as const) {
        progress(`hostile: round ${r + 1}/${rounds}, stall under ${kind === 'none' ? 'no flood' : `a ${kind} flood`}`);
        stalls[kind].push(await stall(kind));
      }
      for (const kind of ['none', 'events', 'checkpoint'] as const) {
        progress(`hostile: round ${r + 1}/${rounds}, close under ${kind === 'none' ? 'no flood' : `a ${kind} flood`}`);
        closes[kind].push(await closeUnder(kind));
      }
    }
    const worst = (v: readonly number[]) => round(Math.max(...v));
    const events = median(stalls.events);
    const figures: Figure[] = [
      {
        suite: 'hostile',
        name: 'hostile.checkpoint_flood_stall_ms',
        value: round(median(stalls.checkpoint)),
        unit: 'ms',
        baseline: { name: 'hostile.events_flood_stall_ms', value: round(events) },
        ratio: round(median(stalls.checkpoint) / events),
        detail: {
          worst: worst(stalls.checkpoint),
          target: 50,
          messages: FLOOD,
          state_bytes: BYTES,
          events_worst: worst(stalls.events),
          no_flood: round(median(stalls.none)),
          rounds,
        },
      },
      {
        suite: 'hostile',
        name: 'hostile.events_flood_stall_ms',
        value: round(events),
        unit: 'ms',
        detail: { worst: worst(stalls.events), messages: FLOOD, bytes: BYTES, rounds },
      },
      {
        suite: 'hostile',
        name: 'hostile.close_under_flood_ms',
        value: round(median(closes.checkpoint)),
        unit: 'ms',
        detail: {
          worst: worst(closes.checkpoint),
          bound: CLOSE_TIMEOUT_MS + GRACE_MS,
          timeout: CLOSE_TIMEOUT_MS,
          grace: GRACE_MS,
          no_flood: round(median(closes.none)),
          events_flood: round(median(closes.events)),
          events_worst: worst(closes.events),
          rounds,
        },
      },
    ];
    return figures;
  },
};
