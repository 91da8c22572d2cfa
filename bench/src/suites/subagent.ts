import { fileURLToPath } from 'node:url';
import { createSupervisor, systemClock } from '@troupe/supervisor';
import { Piscina } from 'piscina';
import { approver, spinner, trivial } from '../agents/overhead.js';
import type { Figure, SuiteBody, SuiteContext } from '../Suite.js';
import { median, nowNs, quantile, round } from '../stats.js';

const scope = Object.freeze({ userId: 'u_1', orgId: 'o_1', role: 'admin' });
const emptyTask = fileURLToPath(new URL('../workers/emptyTask.js', import.meta.url));
const MiB = 2 ** 20;

function gc(): void {
  (globalThis as { gc?: () => void }).gc?.();
}

function messagePorts(): number {
  return process.getActiveResourcesInfo().filter((r) => r === 'MessagePort').length;
}

/**
 * Overhead of one trivial subagent run (`supervisor.spawn`: the run tree, the
 * dispatch, the worker, the outcome) against a raw `piscina.run()` of an
 * empty task, both on a one-thread pool, samples interleaved so both see the
 * same machine; the figure is the ratio of the medians.
 */
async function overhead(ctx: SuiteContext): Promise<Figure[]> {
  const pool = createSupervisor({ pool: { threads: 1 }, persistence: null });
  const raw = new Piscina({ filename: emptyTask, minThreads: 1, maxThreads: 1, idleTimeout: Number.POSITIVE_INFINITY });
  await pool.ready();
  const spec = { input: 'hi', scope };
  const rounds = ctx.quick ? 3 : 10;
  const perRound = ctx.quick ? 1_000 : 3_000;
  const ours: number[] = [];
  const base: number[] = [];
  try {
    // Warm up both paths (JIT, module caches) before measuring.
    for (let i = 0; i < 3_000; i++) {
      await raw.run({});
      await pool.spawn(trivial, spec);
    }
    for (let r = 0; r < rounds; r++) {
      ctx.progress(`subagent: overhead round ${r + 1}/${rounds}`);
      for (let i = 0; i < perRound; i++) {
        let t = nowNs();
        await raw.run({});
        base.push((nowNs() - t) / 1000);
        t = nowNs();
        const outcome = await pool.spawn(trivial, spec);
        ours.push((nowNs() - t) / 1000);
        if (outcome.status !== 'done') throw new Error(`trivial run ended ${outcome.status}`);
      }
    }
  } finally {
    await pool.close();
    await raw.close();
  }
  const m = median(ours);
  const b = median(base);
  return [
    {
      suite: 'subagent',
      name: 'subagent.overhead_ratio',
      value: round(m / b),
      unit: 'x',
      baseline: { name: 'raw piscina.run of an empty task (µs, median)', value: round(b) },
      ratio: round(m / b),
      detail: {
        run_us: round(m),
        run_p95_us: round(quantile(ours, 0.95)),
        raw_p95_us: round(quantile(base, 0.95)),
        samples: ours.length,
      },
    },
  ];
}

/** Trivial runs per second on the two-thread pool, many in flight. */
async function throughput(ctx: SuiteContext): Promise<Figure[]> {
  const pool = createSupervisor({ pool: { threads: 2, maxQueue: 100_000 }, persistence: null });
  const raw = new Piscina({ filename: emptyTask, minThreads: 2, maxThreads: 2, idleTimeout: Number.POSITIVE_INFINITY });
  await pool.ready();
  const spec = { input: 'hi', scope };
  const total = ctx.quick ? 20_000 : 100_000;
  const inFlight = 64;
  const drive = async (one: () => Promise<unknown>, n: number): Promise<number> => {
    let next = 0;
    const start = nowNs();
    await Promise.all(
      Array.from({ length: inFlight }, async () => {
        while (next < n) {
          next++;
          await one();
        }
      }),
    );
    return n / ((nowNs() - start) / 1e9);
  };
  try {
    await drive(() => pool.spawn(trivial, spec), 5_000);
    await drive(() => raw.run({}), 5_000);
    const rates: number[] = [];
    const rawRates: number[] = [];
    const trials = ctx.quick ? 2 : 5;
    for (let t = 0; t < trials; t++) {
      ctx.progress(`subagent: throughput trial ${t + 1}/${trials}`);
      rawRates.push(await drive(() => raw.run({}), total));
      rates.push(await drive(() => pool.spawn(trivial, spec), total));
    }
    const rate = median(rates);
    const rawRate = median(rawRates);
    return [
      {
        suite: 'subagent',
        name: 'subagent.runs_per_s',
        value: Math.round(rate),
        unit: 'runs/s',
        baseline: { name: 'raw piscina empty tasks/s, same pool size', value: Math.round(rawRate) },
        ratio: round(rate / rawRate),
        detail: { runs_per_trial: total, in_flight: inFlight, trials },
      },
    ];
  } finally {
    await pool.close();
    await raw.close();
  }
}

/**
 * A long soak (300,000 runs; 10,000 with --quick), one in ten opening its host
 * channel for an approval. Heap and RSS are read after a full GC of this
 * thread at every tenth of the run. The figures are the growth over the
 * second half: the workers' heaps grow for the first ~100,000 runs and then
 * saw up and down (a major GC in a worker gives back ~20 MiB at once), so a
 * leak shows as growth there and warm-up does not. The whole curve, the
 * growth from the first tenth, and the MessagePorts and slots left are in the
 * detail.
 */
async function soak(ctx: SuiteContext): Promise<Figure[]> {
  const pool = createSupervisor({
    pool: { threads: 2, maxQueue: 100_000 },
    persistence: null,
    approval: async () => ({ decision: 'approve' }),
  });
  await pool.ready();
  const total = ctx.quick ? 10_000 : 300_000;
  const tenth = total / 10;
  const spec = { input: 'hi', scope };
  let done = 0;
  const batch = async (n: number): Promise<void> => {
    const runs: Promise<unknown>[] = [];
    for (let i = 0; i < n; i++) {
      const index = done + i;
      runs.push(pool.spawn(index % 10 === 0 ? approver : trivial, spec));
    }
    const outcomes = (await Promise.all(runs)) as { status: string }[];
    for (const o of outcomes) if (o.status !== 'done') throw new Error(`soak run ended ${o.status}`);
    done += n;
  };
  try {
    const portsBefore = messagePorts();
    const heap: number[] = [];
    const rss: number[] = [];
    while (done < total) {
      await batch(100);
      if (done % tenth === 0) {
        gc();
        const memory = process.memoryUsage();
        heap.push(memory.heapUsed / MiB);
        rss.push(memory.rss / MiB);
        ctx.progress(`subagent: soak ${done}/${total}, RSS ${round(memory.rss / MiB)} MiB`);
      }
    }
    const stats = pool.stats();
    const at = (series: number[], tenths: number) => series[tenths - 1] as number;
    const detail = {
      runs: total,
      measured: 'growth from 50% to 100% of the runs',
      heap_at_10pct_mib: round(at(heap, 1)),
      heap_at_50pct_mib: round(at(heap, 5)),
      heap_end_mib: round(at(heap, 10)),
      rss_at_10pct_mib: round(at(rss, 1)),
      rss_at_50pct_mib: round(at(rss, 5)),
      rss_end_mib: round(at(rss, 10)),
      rss_max_mib: round(Math.max(...rss)),
      rss_growth_from_10pct_mib: round(at(rss, 10) - at(rss, 1)),
      rss_by_tenth_mib: rss.map((v) => Math.round(v)).join(' '),
      message_ports_growth: messagePorts() - portsBefore,
      open_host_ports: stats.pool.openPorts,
      table_slots_in_use: stats.pool.tableSize,
      runs_left: stats.runs,
    };
    return [
      {
        suite: 'subagent',
        name: 'subagent.soak_heap_growth_mib',
        value: round(at(heap, 10) - at(heap, 5)),
        unit: 'MiB',
        detail,
      },
      {
        suite: 'subagent',
        name: 'subagent.soak_rss_growth_mib',
        value: round(at(rss, 10) - at(rss, 5)),
        unit: 'MiB',
        detail,
      },
    ];
  } finally {
    await pool.close();
  }
}

/**
 * A `while (true) {}` tool with `timeoutMs: 50` and a grace of 50 ms: time
 * from the call's start (its telemetry event on this thread) to the outcome,
 * and the pool's strength afterwards.
 */
async function deadlineKill(ctx: SuiteContext): Promise<Figure[]> {
  const pool = createSupervisor({ pool: { threads: 2, graceMs: 50, watchdogIntervalMs: 5 }, persistence: null });
  await pool.ready();
  let started = 0;
  pool.on('tool.execute.start', (e) => {
    started = e.at;
  });
  const trials = ctx.quick ? 3 : 9;
  const times: number[] = [];
  let threadsAfter = 0;
  try {
    for (let t = 0; t < trials; t++) {
      ctx.progress(`subagent: deadline kill ${t + 1}/${trials}`);
      started = 0;
      const outcome = await pool.spawn(spinner, { input: 'spin', scope });
      const ended = systemClock.now();
      if (outcome.status !== 'failed') throw new Error(`the spinning tool ended ${outcome.status}`);
      // The start event travels over the host channel; if it was not seen, fall back to nothing.
      if (started > 0) times.push(ended - started);
      // Back to full strength: a run completes and both threads are there.
      const after = await pool.spawn(trivial, { input: 'x', scope });
      if (after.status !== 'done') throw new Error('the pool did not recover');
      threadsAfter = pool.stats().pool.threads;
    }
  } finally {
    await pool.close();
  }
  return [
    {
      suite: 'subagent',
      name: 'subagent.deadline_kill_ms',
      value: round(median(times)),
      unit: 'ms',
      detail: {
        max_ms: round(Math.max(...times)),
        trials: times.length,
        timeout_ms: 50,
        grace_ms: 50,
        threads_after: threadsAfter,
      },
    },
  ];
}

/** Issue 4's figures: overhead against raw piscina, throughput, soak, deadline kill. */
export const subagentSuite: SuiteBody = {
  async run(ctx) {
    const figures: Figure[] = [];
    figures.push(...(await overhead(ctx)));
    figures.push(...(await throughput(ctx)));
    // Memory and kill timing do not depend on placement: measure them once, unpinned.
    if (ctx.placement === 'unpinned') {
      figures.push(...(await soak(ctx)));
      figures.push(...(await deadlineKill(ctx)));
    }
    return figures;
  },
};
