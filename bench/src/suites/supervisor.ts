import { fileURLToPath } from 'node:url';
import { type Agent, encodeSubagentTask } from '@troupe/core';
import { WORKER_URL } from '@troupe/subagent';
import { createSupervisor, type Supervisor } from '@troupe/supervisor';
import { CancellationTable } from '@troupe/supervisor/internal';
import { Piscina } from 'piscina';
import { asker, delegator, fanout100, trivial } from '../agents/overhead.js';
import type { Figure, Suite, SuiteContext } from '../Suite.js';
import { median, nowNs, quantile, round } from '../stats.js';

const scope = Object.freeze({ userId: 'u_1', orgId: 'o_1', role: 'admin' });
const MiB = 2 ** 20;

function gc(): void {
  (globalThis as { gc?: () => void }).gc?.();
}

/** Median milliseconds of one fan-out turn: straight on piscina, and through each supervisor variant. */
export interface FanoutTrials {
  readonly base: readonly number[];
  readonly variants: readonly (readonly number[])[];
  readonly trials: number;
}

/**
 * One parent turn delegating to 100 subagents on the two-thread pool, against
 * the same 100 subagent tasks posted straight to piscina (our worker entry,
 * no supervisor, no parent loop) in the same run. Each variant is a
 * supervisor prepared by its function (a tracing bridge installed, say);
 * samples are interleaved so every variant sees the same machine.
 */
export async function fanoutTrials(
  ctx: SuiteContext,
  variants: readonly ((supervisor: Supervisor) => void)[] = [() => {}],
): Promise<FanoutTrials> {
  const supervisors = variants.map((prepare) => {
    const s = createSupervisor({ pool: { threads: 2 }, persistence: null });
    prepare(s);
    return s;
  });
  await Promise.all(supervisors.map((s) => s.pool.ready()));
  // The baseline: the worker entry on its own pool, with its own table.
  const table = new CancellationTable({});
  // Each thread gets the cancellation buffer with its first task, as the supervisor's dispatch does.
  const handed = new Set<number>();
  const kQueue = Piscina.queueOptionsSymbol;
  const direct = new Piscina({
    filename: fileURLToPath(WORKER_URL),
    minThreads: 2,
    maxThreads: 2,
    idleTimeout: Number.POSITIVE_INFINITY,
    loadBalancer: (task, workers) => {
      for (const w of workers) {
        if (w.currentUsage !== 0) continue;
        const tuple = (task as unknown as Record<symbol, unknown[] | null>)[kQueue];
        if (tuple && !handed.has(w.id)) {
          handed.add(w.id);
          tuple[12] = table.buffer;
        }
        return w;
      }
      return null;
    },
  });
  const module = (trivial as Agent).module as string;
  const directRun = async (): Promise<void> => {
    const handles = Array.from({ length: 100 }, (_, i) => table.register(`d${i}`, {}));
    await Promise.all(
      handles.map((h, i) => {
        const tuple = encodeSubagentTask({
          module,
          agent: 'trivial',
          agentId: `d${i}`,
          slot: h.index,
          generation: h.generation,
          host: 0,
          scope,
          input: `task ${i}`,
          capability: 'baseline-capability00000',
        });
        (tuple as unknown as Record<symbol, unknown>)[kQueue] = tuple;
        return direct.run(tuple);
      }),
    );
    for (let i = 0; i < 100; i++) table.release(`d${i}`);
  };
  const parentRun = async (supervisor: Supervisor): Promise<void> => {
    const ref = await supervisor.startAgent(fanout100, { scope });
    const reply = await ref.send('go');
    if (reply.status !== 'done' || reply.text !== '100 done') throw new Error(`fan-out ended ${JSON.stringify(reply)}`);
    await supervisor.stopAgent(ref.id);
  };
  const trials = ctx.quick ? 20 : 100;
  const ours: number[][] = supervisors.map(() => []);
  const base: number[] = [];
  try {
    for (let i = 0; i < 10; i++) {
      await directRun();
      for (const s of supervisors) await parentRun(s);
    }
    for (let t = 0; t < trials; t++) {
      if (t % 10 === 0) ctx.progress(`fan-out ${t}/${trials}`);
      let start = nowNs();
      await directRun();
      base.push((nowNs() - start) / 1e6);
      for (const [i, s] of supervisors.entries()) {
        start = nowNs();
        await parentRun(s);
        ours[i]?.push((nowNs() - start) / 1e6);
      }
    }
  } finally {
    await Promise.all(supervisors.map((s) => s.close()));
    await direct.close();
  }
  return { base, variants: ours, trials };
}

async function fanout(ctx: SuiteContext): Promise<Figure[]> {
  const { base, variants, trials } = await fanoutTrials(ctx);
  const ours = variants[0] ?? [];
  const m = median(ours);
  const b = median(base);
  return [
    {
      suite: 'supervisor',
      name: 'supervisor.fanout100_ratio',
      value: round(m / b),
      unit: 'x',
      baseline: { name: 'the same 100 subagent tasks straight on piscina (ms, median)', value: round(b) },
      ratio: round(m / b),
      detail: { parent_turn_ms: round(m), parent_p95_ms: round(quantile(ours, 0.95)), trials },
    },
  ];
}

/**
 * Suspend → answer → resume, answered as soon as the request event fires:
 * a parent agent whose subagent (in a worker) asks a person, and a parent
 * whose own tool asks.
 */
async function hitl(ctx: SuiteContext): Promise<Figure[]> {
  const supervisor = createSupervisor({ pool: { threads: 2 }, persistence: null });
  await supervisor.pool.ready();
  const lead: Agent = (await import('../agents/hitlLead.js')).hitlLead;
  // No person: the answer is given as soon as the request event fires.
  let resumed: Promise<unknown> | undefined;
  supervisor.on('request.opened', (e) => {
    resumed = supervisor.answer(e.request.id, { ok: true });
  });
  const roundTrip = async (agent: Agent): Promise<number> => {
    const ref = await supervisor.startAgent(agent, { scope });
    const start = nowNs();
    const first = await ref.send('go');
    if (first.status !== 'suspended') throw new Error(`expected a suspension, got ${first.status}`);
    // The listener answered; the resumed message's reply ends the round trip.
    const final = (await resumed) as { status: string } | undefined;
    const elapsed = (nowNs() - start) / 1e6;
    if (final?.status !== 'done') throw new Error(`the resumed run ended ${final?.status}`);
    await supervisor.stopAgent(ref.id);
    return elapsed;
  };
  const trials = ctx.quick ? 200 : 1000;
  const nested: number[] = [];
  const local: number[] = [];
  try {
    for (let i = 0; i < 50; i++) {
      await roundTrip(lead);
      await roundTrip(asker);
    }
    for (let t = 0; t < trials; t++) {
      if (t % 200 === 0) ctx.progress(`supervisor: suspend → answer → resume ${t}/${trials}`);
      nested.push(await roundTrip(lead));
      local.push(await roundTrip(asker));
    }
  } finally {
    await supervisor.close();
  }
  return [
    {
      suite: 'supervisor',
      name: 'supervisor.hitl_roundtrip_ms',
      value: round(median(nested)),
      unit: 'ms',
      detail: {
        p95_ms: round(quantile(nested, 0.95)),
        parent_tool_only_ms: round(median(local)),
        trials,
        what: 'send → subagent suspends in a worker → request reaches the host → answered → the same subagent resumes on a worker → the parent answers',
      },
    },
  ];
}

/**
 * 100,000 runs through parent agents (each starts an agent, one message that
 * delegates one task, stops it): heap from the 10,000th run to the end, after
 * a full GC, and the ports and listeners left open.
 */
async function soak(ctx: SuiteContext): Promise<Figure[]> {
  const supervisor = createSupervisor({ pool: { threads: 2, maxQueue: 100_000 }, persistence: null });
  await supervisor.pool.ready();
  const total = ctx.quick ? 10_000 : 100_000;
  const mark = total / 10;
  const concurrency = 32;
  let started = 0;
  let heapAtMark = 0;
  let rssAtMark = 0;
  let listenersAtMark = 0;
  const listeners = () => supervisor.eventNames().reduce((n, e) => n + supervisor.listenerCount(e), 0);
  const one = async (): Promise<void> => {
    const ref = await supervisor.startAgent(delegator, { scope });
    const reply = await ref.send('go');
    if (reply.status !== 'done') throw new Error(`soak run ended ${reply.status}`);
    await supervisor.stopAgent(ref.id);
  };
  try {
    const worker = async (): Promise<void> => {
      while (started < total) {
        started++;
        if (started === mark) {
          gc();
          heapAtMark = process.memoryUsage().heapUsed;
          rssAtMark = process.memoryUsage().rss;
          listenersAtMark = listeners();
        }
        if (started % 10_000 === 0) ctx.progress(`supervisor: soak ${started}/${total}`);
        await one();
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
    gc();
    const heap = process.memoryUsage().heapUsed;
    const rss = process.memoryUsage().rss;
    const stats = supervisor.stats();
    return [
      {
        suite: 'supervisor',
        name: 'supervisor.soak_heap_growth_mib',
        value: round((heap - heapAtMark) / MiB),
        unit: 'MiB',
        detail: {
          runs: total,
          heap_at_10pct_mib: round(heapAtMark / MiB),
          heap_end_mib: round(heap / MiB),
          rss_growth_mib: round((rss - rssAtMark) / MiB),
          listeners_growth: listeners() - listenersAtMark,
          open_host_ports: stats.pool.openPorts,
          agents_left: stats.agents,
          table_slots_in_use: stats.pool.tableSize,
          suspended_left: stats.suspendedSubagents,
        },
      },
    ];
  } finally {
    await supervisor.close();
  }
}

/** Issue 5's figures: fan-out against direct piscina, HITL round trip, 100k-run soak. */
export const supervisorSuite: Suite = {
  name: 'supervisor',
  description: 'fan-out of 100 subagents vs the same tasks on piscina, suspend→answer→resume, 100k-run soak',
  placementSensitive: false,
  inDefaultRun: true,
  async run(ctx) {
    return [...(await fanout(ctx)), ...(await hitl(ctx)), ...(await soak(ctx))];
  },
};
