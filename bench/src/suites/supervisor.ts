import { fileURLToPath } from 'node:url';
import type { Agent } from '@troupe/core';
import { encodeSubagentTask } from '@troupe/core/internal';
import { WORKER_URL } from '@troupe/subagent';
import { createSupervisor, type Supervisor, systemClock } from '@troupe/supervisor';
import { CancellationTable } from '@troupe/supervisor/internal';
import { Piscina } from 'piscina';
import { asker, delegator, fanout100, trivial } from '../agents/overhead.js';
import type { Figure, SuiteBody, SuiteContext } from '../Suite.js';
import { median, nowNs, quantile, round } from '../stats.js';

const scope = Object.freeze({ userId: 'u_1', orgId: 'o_1', role: 'admin' });
const MiB = 2 ** 20;

function gc(): void {
  (globalThis as { gc?: () => void }).gc?.();
}

/** Median milliseconds of one fan-out turn: straight on piscina, and through each supervisor variant. */
/** Turns of each kind run before the timed trials (see the warm-up in {@link fanoutTrials}). */
const FANOUT_WARMUP = 80;

export interface FanoutTrials {
  readonly base: readonly number[];
  readonly variants: readonly (readonly number[])[];
  readonly trials: number;
  /** Turns each variant ran before the trials (not timed). */
  readonly warmup: number;
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
    // Warm-up: a fresh supervisor's turn reaches its steady state only after 60–80 turns (6,000–
    // 8,000 child runs: the JIT tiering the run tree's and the bridge's code up, on the CPUs the
    // runs use); the direct baseline is steady after a few. Measured in medians of 10 trials:
    // after 10 warm-up turns ours read 13–26 ms traced, then 5–6; after 40, 6.2–7.4 for 40 more
    // trials, then 5.0–5.5; after 80, 4.9–5.4 from the first trial.
    for (let i = 0; i < FANOUT_WARMUP; i++) {
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
  return { base, variants: ours, trials, warmup: FANOUT_WARMUP };
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
    // The question reaches the host while the run is still going (it is answered then), so
    // `send` may resolve with the final reply at once, or with a suspension the answer resumes.
    const first = await ref.send('go');
    const final = (first.status === 'suspended' ? await resumed : first) as { status: string } | undefined;
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
 * A message whose one turn opens n questions, all answered at once (issue 31, item 2): the time
 * from the first `answer()` to the last reply, for 10,000 and, in the same run, 1,000 (work
 * linear in n reads about 10×), with the default store (in memory); and with 10,000 open, what
 * one answer costs when each waits for the reply to the one before (each resumes the run and
 * saves its state, which holds every open call: O(open) per answer, the part left).
 */
async function answers(ctx: SuiteContext): Promise<Figure[]> {
  const supervisor = createSupervisor({ pool: { threads: 1 } });
  await supervisor.pool.ready();
  const { manyAsker } = await import('../agents/manyQuestions.js');
  let resumes = 0;
  supervisor.on('agent.run.started', (e) => {
    if (e.resumed) resumes++;
  });
  let agents = 0;
  const open = async (n: number) => {
    const ref = await supervisor.startAgent(manyAsker, { scope, agentId: `many-${agents++}` });
    const start = nowNs();
    const first = await ref.send(String(n));
    const suspendMs = (nowNs() - start) / 1e6;
    const ids = supervisor.pendingRequests().map((p) => p.request.id);
    if (first.status !== 'suspended' || ids.length !== n)
      throw new Error(`${n} questions: ${first.status}, ${ids.length} open`);
    return { ref, ids, suspendMs };
  };
  const burst = async (n: number): Promise<{ ms: number; suspendMs: number; resumes: number }> => {
    const { ref, ids, suspendMs } = await open(n);
    gc();
    resumes = 0;
    const start = nowNs();
    const replies = await Promise.all(ids.map((id, i) => supervisor.answer(id, { ok: true, data: i })));
    const ms = (nowNs() - start) / 1e6;
    const last = replies[replies.length - 1];
    if (last?.status !== 'done' || last.text !== `${n} answered`) throw new Error(`${n} answers ended ${last?.status}`);
    await supervisor.stopAgent(ref.id);
    return { ms, suspendMs, resumes };
  };
  const trials = ctx.quick ? 3 : 7;
  const sequential = ctx.quick ? 10 : 40;
  const big: number[] = [];
  const small: number[] = [];
  const suspends: number[] = [];
  const perAnswer: number[] = [];
  let bigResumes = 0;
  try {
    await burst(1000); // warm-up
    for (let t = 0; t < trials; t++) {
      ctx.progress(`supervisor: 10,000 answers at once ${t}/${trials}`);
      const b = await burst(10_000);
      big.push(b.ms);
      suspends.push(b.suspendMs);
      bigResumes = Math.max(bigResumes, b.resumes);
      small.push((await burst(1000)).ms);
    }
    ctx.progress(`supervisor: ${sequential} answers one by one, 10,000 open`);
    const { ref, ids } = await open(10_000);
    for (const [i, id] of ids.slice(0, sequential).entries()) {
      const start = nowNs();
      const reply = await supervisor.answer(id, { ok: true, data: i });
      perAnswer.push((nowNs() - start) / 1e6);
      if (reply.status !== 'suspended') throw new Error(`one by one: ${reply.status}`);
    }
    await supervisor.stopAgent(ref.id);
  } finally {
    await supervisor.close();
  }
  const m = median(big);
  const b = median(small);
  return [
    {
      suite: 'supervisor',
      name: 'supervisor.answer_10k_ms',
      value: round(m),
      unit: 'ms',
      baseline: { name: '1,000 answers in one message (ms, median)', value: round(b) },
      ratio: round(m / b),
      detail: {
        max_ms: round(Math.max(...big)),
        per_answer_us: round((m * 1000) / 10_000),
        resumes: bigResumes,
        open_10k_questions_ms: round(median(suspends)),
        one_by_one_ms_per_answer_10k_open: round(median(perAnswer)),
        one_by_one_answers: perAnswer.length,
        trials,
        what: 'a message whose one turn asks 10,000 questions; all answered at once (memory store): first answer() → every reply',
      },
    },
  ];
}

/**
 * A subagent's tool asks a person while its seven siblings (one turn of the
 * parent, eight `task` calls, eight threads) still run: the time from the
 * tool returning `pending` (measured in its worker, epoch ms) to
 * `request.opened` on the host. Then the siblings are let go, the parent
 * suspends, the question is answered and the message ends.
 */
async function nestedQuestion(ctx: SuiteContext): Promise<Figure[]> {
  const supervisor = createSupervisor({ pool: { threads: 8 }, persistence: null });
  await supervisor.pool.ready();
  const { questionFanout } = await import('../agents/trees.js');
  const gateBuffer = new SharedArrayBuffer(4);
  const gate = new Int32Array(gateBuffer);
  const delays: number[] = [];
  let opened: ((id: string) => void) | undefined;
  supervisor.on('request.opened', (e) => {
    const at = (e.request.data as { at?: number } | undefined)?.at;
    if (typeof at === 'number') delays.push(systemClock.now() - at);
    opened?.(e.request.id);
  });
  const trials = ctx.quick ? 30 : 200;
  try {
    for (let t = 0; t < trials + 10; t++) {
      if (t % 50 === 0) ctx.progress(`supervisor: nested question ${t}/${trials + 10}`);
      Atomics.store(gate, 0, 0);
      const ref = await supervisor.startAgent(questionFanout, { scope, toolContext: { gate } });
      const asked = new Promise<string>((resolve) => {
        opened = resolve;
      });
      const sent = ref.send('go');
      const requestId = await asked;
      // The seven siblings were running when it arrived: let them finish.
      Atomics.store(gate, 0, 1);
      Atomics.notify(gate, 0);
      const first = await sent;
      const final = first.status === 'suspended' ? await supervisor.answer(requestId, { ok: true }) : first;
      if (final.status !== 'done') throw new Error(`the question fan-out ended ${final.status}`);
      await supervisor.stopAgent(ref.id);
      if (t < 10) delays.length = 0; // warm-up
    }
  } finally {
    await supervisor.close();
  }
  return [
    {
      suite: 'supervisor',
      name: 'supervisor.nested_question_ms',
      value: round(median(delays)),
      unit: 'ms',
      detail: {
        p95_ms: round(quantile(delays, 0.95)),
        max_ms: round(Math.max(...delays)),
        trials: delays.length,
        what: 'a subagent tool returns pending while 7 sibling subagents still run → request.opened on the host',
      },
    },
  ];
}

/**
 * A three-level tree of 100 runs (a parent, 9 subagents delegating 10 each;
 * 12 threads, so the leaves that found a thread poll `isCancelled()` every
 * millisecond and the rest wait for one) is cancelled at its root: the time
 * from `cancel()` to the reply, with every descendant's end checked to come
 * before it.
 */
async function cancelTree(ctx: SuiteContext): Promise<Figure[]> {
  const supervisor = createSupervisor({ pool: { threads: 12 }, persistence: null });
  await supervisor.pool.ready();
  const { treeRoot, TREE_RUNS } = await import('../agents/trees.js');
  const times: number[] = [];
  let ended = 0;
  let started = 0;
  let polling = 0;
  let allStarted: (() => void) | undefined;
  supervisor.on('subagent.spawned', () => {
    started++;
    if (started === TREE_RUNS - 1) allStarted?.();
  });
  supervisor.on('tool.execute.start', () => {
    polling++;
  });
  const end = () => {
    ended++;
  };
  for (const name of ['subagent.cancelled', 'subagent.done', 'subagent.failed', 'subagent.crashed'] as const) {
    supervisor.on(name, end);
  }
  const trials = ctx.quick ? 10 : 60;
  // Warm-up: the first ~30 cancels of a fresh supervisor read 3–20 ms (the JIT compiling the
  // spawn, cancel and outcome paths on threads that share the two CPUs with the run), the
  // steady state 1.5–3 ms. With 3, a quick run's 10 trials were mostly warm-up.
  const warmup = 30;
  let pollingSeen = 0;
  try {
    for (let t = 0; t < trials + warmup; t++) {
      if (t % 10 === 0) ctx.progress(`supervisor: cancel a 100-run tree ${t}/${trials + warmup}`);
      started = 0;
      ended = 0;
      polling = 0;
      const ref = await supervisor.startAgent(treeRoot, { scope });
      const spawnedAll = new Promise<void>((resolve) => {
        allStarted = resolve;
      });
      const reply = ref.send('go');
      await spawnedAll;
      // Every run exists; the leaves that got a thread are polling.
      while (polling < 3) await new Promise((resolve) => setImmediate(resolve));
      const start = nowNs();
      ref.cancel('user');
      const r = await reply;
      const elapsed = (nowNs() - start) / 1e6;
      if (r.status !== 'cancelled') throw new Error(`the cancelled tree ended ${r.status}`);
      if (ended !== TREE_RUNS - 1)
        throw new Error(`the reply came with ${ended} of ${TREE_RUNS - 1} descendants ended`);
      await supervisor.stopAgent(ref.id);
      if (t >= warmup) {
        times.push(elapsed);
        pollingSeen += polling;
      }
    }
  } finally {
    await supervisor.close();
  }
  return [
    {
      suite: 'supervisor',
      name: 'supervisor.cancel_tree_ms',
      value: round(median(times)),
      unit: 'ms',
      detail: {
        p95_ms: round(quantile(times, 0.95)),
        runs: TREE_RUNS,
        threads: 12,
        polling_leaves_per_trial: round(pollingSeen / times.length),
        trials: times.length,
        what: 'cancel() of the root → its reply, every descendant ended before it',
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
export const supervisorSuite: SuiteBody = {
  async run(ctx) {
    return [
      ...(await fanout(ctx)),
      ...(await hitl(ctx)),
      ...(await answers(ctx)),
      ...(await nestedQuestion(ctx)),
      ...(await cancelTree(ctx)),
      ...(await soak(ctx)),
    ];
  },
};
