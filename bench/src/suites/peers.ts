// Issue 16.7: Troupe measured side by side with its peers (OpenAI Agents JS, the AI SDK,
// LangGraph.js), each through its own agent loop with a scripted model that makes no network
// call, on the same workloads: a trivial run, CPU-bound tool calls fanned out, a cancel seen by
// a CPU-bound tool, a tool that never yields under a deadline, and a question to a person.
// Contenders are measured in interleaved blocks (the order rotates each block) so a change in
// machine load falls on all of them alike; figures are medians.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Agent } from '@troupe/core';
import { createSupervisor, MemoryPersistence } from '@troupe/supervisor';
import { Piscina } from 'piscina';
import { hitlLead } from '../agents/hitlLead.js';
import {
  burnFanout,
  burnOne,
  checkingSpinner,
  NEVER_YIELDS_DEADLINE_MS,
  neverYielding,
  peerTrivial,
} from '../agents/peerAgents.js';
import { burn, calibrate, epochMs } from '../peers/burn.js';
import type { Peer, ToolStop } from '../peers/Peer.js';
import type { Figure, SuiteBody, SuiteContext } from '../Suite.js';
import { median, nowNs, quantile, round } from '../stats.js';

const suite = 'peers';
const scope = Object.freeze({ userId: 'u_1', orgId: 'o_1', role: 'admin' });
const emptyTask = fileURLToPath(new URL('../workers/emptyTask.js', import.meta.url));
const burnTask = fileURLToPath(new URL('../workers/burnTask.js', import.meta.url));
/**
 * The peers, imported when the suite runs (loadPeers): their frameworks take about a second to
 * import, and the harness imports every suite to read its name and flags.
 */
let PEERS: readonly Peer[] = [];
const FANOUT_CALLS = 8;
const BURN_MS = 20;
const CANCEL_AFTER_MS = 50;
const CHECKING_TOOL_MS = 600;
const NEVER_YIELDS_MS = 2_000;
const GRACE_MS = 100;

type SupervisorT = ReturnType<typeof createSupervisor>;

/** A figure key for a contender (`OpenAI Agents JS` → `openai_agents_js`). */
function key(name: string): string {
  return name
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .replace(/^_|_$/g, '');
}

function troupeVersion(): string {
  const file = new URL('../../../packages/supervisor/package.json', import.meta.url);
  return `@troupe/supervisor@${(JSON.parse(readFileSync(file, 'utf8')) as { version: string }).version}`;
}

interface Contender {
  readonly name: string;
  one(): Promise<void>;
}

/**
 * `rounds` blocks; in each, every contender does `perBlock` calls, timed one by one (µs), the
 * contenders' order rotated by one each block. Returns the samples by contender name.
 */
async function interleaved(
  ctx: SuiteContext,
  label: string,
  contenders: readonly Contender[],
  rounds: number,
  perBlock: number,
  warmup: number,
): Promise<Map<string, number[]>> {
  for (const c of contenders) for (let i = 0; i < warmup; i++) await c.one();
  const samples = new Map(contenders.map((c) => [c.name, [] as number[]]));
  for (let r = 0; r < rounds; r++) {
    ctx.progress(`peers: ${label} block ${r + 1}/${rounds}`);
    for (let k = 0; k < contenders.length; k++) {
      const c = contenders[(k + r) % contenders.length] as Contender;
      const out = samples.get(c.name) as number[];
      for (let i = 0; i < perBlock; i++) {
        const start = nowNs();
        await c.one();
        out.push((nowNs() - start) / 1000);
      }
    }
  }
  return samples;
}

async function expectDone(sup: SupervisorT, agent: Agent, input: string): Promise<void> {
  const outcome = await sup.spawn(agent, { input, scope });
  if (outcome.status !== 'done') throw new Error(`peers: ${agent.name} ended ${outcome.status}`);
}

async function parentTurn(sup: SupervisorT, agent: Agent, input: string) {
  const handle = await sup.startAgent(agent, { scope });
  const reply = await handle.send(input);
  await sup.stopAgent(handle.id);
  if (reply.status !== 'done') throw new Error(`peers: ${handle.id} replied ${reply.status}`);
}

/** 1. A trivial agent run: one call of a trivial tool, then text. µs per run. */
async function trivial(ctx: SuiteContext): Promise<Figure[]> {
  const sup = createSupervisor({ pool: { threads: 1 }, persistence: null });
  const raw = new Piscina({ filename: emptyTask, minThreads: 1, maxThreads: 1, idleTimeout: Number.POSITIVE_INFINITY });
  await sup.ready();
  const contenders: Contender[] = [
    { name: 'raw piscina', one: () => raw.run({}) },
    { name: 'Troupe subagent', one: () => expectDone(sup, peerTrivial, 'go') },
    { name: 'Troupe parent', one: () => parentTurn(sup, peerTrivial, 'go') },
    ...PEERS.map((p) => ({ name: p.name, one: () => p.trivial() })),
  ];
  let samples: Map<string, number[]>;
  try {
    samples = await interleaved(
      ctx,
      'trivial run',
      contenders,
      ctx.quick ? 4 : 10,
      ctx.quick ? 60 : 200,
      ctx.quick ? 100 : 300,
    );
  } finally {
    await sup.close();
    await raw.close();
  }
  const med = (name: string) => median(samples.get(name) as number[]);
  const base = med('raw piscina');
  const sub = med('Troupe subagent');
  return contenders
    .filter((c) => c.name !== 'raw piscina')
    .map((c) => {
      const m = med(c.name);
      const detail: Record<string, number | string> = {
        p95_us: round(quantile(samples.get(c.name) as number[], 0.95)),
        samples: (samples.get(c.name) as number[]).length,
      };
      if (!c.name.startsWith('Troupe')) {
        detail.troupe_subagent_us = round(sub);
        detail.troupe_subagent_over_this = round(sub / m);
        detail.troupe_subagent_cheaper = sub < m ? 'yes' : 'no';
      }
      if (c.name === 'Troupe parent') detail.measured = 'startAgent + send + stopAgent';
      return {
        suite,
        name: `peers.trivial_run_us.${key(c.name)}`,
        value: round(m),
        unit: 'µs',
        baseline: { name: 'raw piscina.run of an empty task, 1 thread (µs, median)', value: round(base) },
        ratio: round(m / base),
        detail,
      };
    });
}

/** 2. One model turn asks FANOUT_CALLS calls of a ~20 ms CPU tool. Wall ms per fan-out. */
async function fanout(ctx: SuiteContext, iterations: number): Promise<Figure[]> {
  const sup = createSupervisor({ pool: { threads: 2 }, persistence: null });
  const raw = new Piscina({ filename: burnTask, minThreads: 2, maxThreads: 2, idleTimeout: Number.POSITIVE_INFINITY });
  await sup.ready();
  const contenders: Contender[] = [
    {
      // What two threads give on this machine right now: the ceiling of any thread pool.
      name: 'raw piscina 2 threads',
      one: async () => {
        await Promise.all(Array.from({ length: FANOUT_CALLS }, () => raw.run({ n: iterations })));
      },
    },
    {
      name: 'sequential loop',
      one: async () => {
        for (let i = 0; i < FANOUT_CALLS; i++) burn(iterations);
      },
    },
    { name: 'Troupe parent + task', one: () => parentTurn(sup, burnFanout, `${FANOUT_CALLS} ${iterations}`) },
    {
      name: 'Troupe spawns',
      one: async () => {
        await Promise.all(Array.from({ length: FANOUT_CALLS }, () => expectDone(sup, burnOne, String(iterations))));
      },
    },
    ...PEERS.map((p) => ({ name: p.name, one: () => p.fanout(FANOUT_CALLS, iterations) })),
  ];
  let samples: Map<string, number[]>;
  try {
    samples = await interleaved(ctx, 'fan-out', contenders, ctx.quick ? 3 : 8, 1, 1);
  } finally {
    await sup.close();
    await raw.close();
  }
  const ms = (name: string) => median(samples.get(name) as number[]) / 1000;
  const seq = ms('sequential loop');
  const parent = ms('Troupe parent + task');
  const spawns = ms('Troupe spawns');
  const common = { calls: FANOUT_CALLS, iterations_per_call: iterations, threads: 2, trials: ctx.quick ? 3 : 8 };
  return contenders.map((c) => {
    const m = ms(c.name);
    const detail: Record<string, number | string> = {
      ...common,
      max_ms: round(Math.max(...(samples.get(c.name) as number[])) / 1000),
    };
    if (!c.name.startsWith('Troupe') && c.name !== 'sequential loop') {
      detail.troupe_parent_speedup = round(m / parent);
      detail.troupe_spawns_speedup = round(m / spawns);
    }
    if (c.name.startsWith('Troupe') || c.name.startsWith('raw')) detail.speedup_over_sequential = round(seq / m);
    return {
      suite,
      name: `peers.fanout_ms.${key(c.name)}`,
      value: round(m),
      unit: 'ms',
      baseline: { name: `a plain sequential loop of ${FANOUT_CALLS} calls (ms, median)`, value: round(seq) },
      ratio: round(m / seq),
      detail,
    };
  });
}

interface CancelTrial {
  /** Host's intent (t0 + CANCEL_AFTER_MS) → the abort call ran. */
  readonly abortThroughMs: number;
  /** Intent → the tool stopped. */
  readonly toolStoppedMs: number;
  /** Intent → the run ended. */
  readonly runEndedMs: number;
  readonly sawCancel: boolean;
  /** How the run's promise settled (`resolved`, a Troupe reply/outcome status, or `threw <name>`). */
  readonly how: string;
}

/** Time a cancel `CANCEL_AFTER_MS` into a run: `start` begins the run and returns its end. */
async function cancelTrial(
  start: (abort: () => void) => { ended: Promise<unknown>; stop: () => ToolStop | undefined; abort: () => void },
): Promise<CancelTrial> {
  let abortedAt = Number.NaN;
  const t0 = epochMs();
  const intent = t0 + CANCEL_AFTER_MS;
  const run = start(() => {});
  const fired = new Promise<void>((resolve) =>
    setTimeout(() => {
      abortedAt = epochMs();
      run.abort();
      resolve();
    }, CANCEL_AFTER_MS),
  );
  const how = await run.ended.then(
    (v) => (typeof v === 'object' && v !== null && 'status' in v ? String(v.status) : 'resolved'),
    (error: unknown) => `threw ${(error as Error).name}`,
  );
  const endedAt = epochMs();
  await fired;
  const stop = run.stop();
  if (stop === undefined) throw new Error('peers: the checking tool did not report its stop');
  return {
    abortThroughMs: abortedAt - intent,
    toolStoppedMs: stop.stoppedAt - intent,
    runEndedMs: endedAt - intent,
    sawCancel: stop.sawCancel,
    how,
  };
}

/** 3. A CPU tool that checks for a cancel; the host cancels CANCEL_AFTER_MS in. */
async function cancel(ctx: SuiteContext, iterations: number): Promise<Figure[]> {
  const sup = createSupervisor({ pool: { threads: 2 }, persistence: null });
  await sup.ready();
  const sharedStop = () => new Float64Array(new SharedArrayBuffer(16));
  const stopOf = (stop: Float64Array) => () =>
    stop[0] === 0 ? undefined : { stoppedAt: stop[0] as number, sawCancel: stop[1] === 1 };
  const contenders: { name: string; trial: () => Promise<CancelTrial> }[] = [
    {
      name: 'Troupe subagent',
      trial: () =>
        cancelTrial(() => {
          const controller = new AbortController();
          const stop = sharedStop();
          const ended = sup.spawn(checkingSpinner, {
            input: 'go',
            scope,
            toolContext: { iterations, stop },
            signal: controller.signal,
          });
          return { ended, stop: stopOf(stop), abort: () => controller.abort() };
        }),
    },
    {
      name: 'Troupe parent',
      trial: async () => {
        const stop = sharedStop();
        const handle = await sup.startAgent(checkingSpinner, { scope, toolContext: { iterations, stop } });
        const result = await cancelTrial(() => ({
          ended: handle.send('go'),
          stop: stopOf(stop),
          abort: () => handle.cancel('user'),
        }));
        await sup.stopAgent(handle.id);
        return result;
      },
    },
    ...PEERS.map((p) => ({
      name: p.name,
      trial: () =>
        cancelTrial(() => {
          const controller = new AbortController();
          let stop: ToolStop | undefined;
          const ended = p.cancellable(iterations, controller.signal, (s) => {
            stop = s;
          });
          return { ended, stop: () => stop, abort: () => controller.abort() };
        }),
    })),
  ];
  const trials = ctx.quick ? 2 : 5;
  const results = new Map(contenders.map((c) => [c.name, [] as CancelTrial[]]));
  try {
    for (let r = 0; r < trials; r++) {
      ctx.progress(`peers: cancel trial ${r + 1}/${trials}`);
      for (let k = 0; k < contenders.length; k++) {
        const c = contenders[(k + r) % contenders.length] as (typeof contenders)[number];
        (results.get(c.name) as CancelTrial[]).push(await c.trial());
      }
    }
  } finally {
    await sup.close();
  }
  return contenders.map((c) => {
    const rs = results.get(c.name) as CancelTrial[];
    return {
      suite,
      name: `peers.cancel_to_tool_stopped_ms.${key(c.name)}`,
      value: round(median(rs.map((t) => t.toolStoppedMs))),
      unit: 'ms',
      detail: {
        abort_got_through_ms: round(median(rs.map((t) => t.abortThroughMs))),
        run_ended_ms: round(median(rs.map((t) => t.runEndedMs))),
        tool_saw_cancel: `${rs.filter((t) => t.sawCancel).length}/${rs.length}`,
        how_it_ended: [...new Set(rs.map((t) => t.how))].join('; '),
        max_ms: round(Math.max(...rs.map((t) => t.toolStoppedMs))),
        cancel_at_ms: CANCEL_AFTER_MS,
        tool_length_ms: CHECKING_TOOL_MS,
        trials: rs.length,
        measured: 'from the host’s intent (run start + 50 ms) to the tool having stopped',
      },
    };
  });
}

/** 4. A tool that never yields (2 s of CPU, no checks) under a 200 ms deadline: when the run ended. */
async function deadline(ctx: SuiteContext, iterations: number): Promise<Figure[]> {
  const sup = createSupervisor({
    pool: { threads: 2, graceMs: GRACE_MS, watchdogIntervalMs: 10 },
    persistence: null,
  });
  await sup.ready();
  const toolContext = { iterations };
  const endings = new Map<string, { ms: number[]; how: string[] }>();
  const note = (name: string, ms: number, how: string) => {
    const e = endings.get(name) ?? { ms: [], how: [] };
    e.ms.push(ms);
    e.how.push(how);
    endings.set(name, e);
  };
  const timed = async (name: string, run: () => Promise<string>) => {
    const start = epochMs();
    let how: string;
    try {
      how = await run();
    } catch (error) {
      how = `threw ${(error as Error).name}`;
    }
    note(name, epochMs() - start, how);
  };
  let threadsAfter = 0;
  const contenders: { name: string; trial: () => Promise<void>; slow: boolean }[] = [
    {
      name: 'Troupe subagent',
      slow: false,
      trial: async () => {
        await timed('Troupe subagent', async () => {
          const outcome = await sup.spawn(neverYielding, { input: 'go', scope, toolContext });
          return outcome.status === 'failed' ? `failed ${outcome.error.name}` : outcome.status;
        });
        await expectDone(sup, peerTrivial, 'after');
        threadsAfter = sup.stats().pool.threads;
      },
    },
    {
      name: 'Troupe parent',
      slow: true,
      trial: async () => {
        const handle = await sup.startAgent(neverYielding, { scope, toolContext });
        await timed('Troupe parent', async () => (await handle.send('go')).status);
        await sup.stopAgent(handle.id);
      },
    },
    ...PEERS.map((p) => ({
      name: p.name,
      slow: true,
      trial: () =>
        timed(p.name, async () => {
          await p.neverYields(iterations, NEVER_YIELDS_DEADLINE_MS);
          return 'resolved';
        }),
    })),
  ];
  const trials = ctx.quick ? 1 : 2;
  try {
    for (let r = 0; r < trials; r++) {
      ctx.progress(`peers: never-yielding tool trial ${r + 1}/${trials}`);
      for (let k = 0; k < contenders.length; k++) {
        const c = contenders[(k + r) % contenders.length] as (typeof contenders)[number];
        await c.trial();
        // The kill is cheap to repeat: three of it for each slow trial.
        if (!c.slow) for (let extra = 0; extra < 2; extra++) await c.trial();
      }
    }
  } finally {
    await sup.close();
  }
  return contenders.map((c) => {
    const e = endings.get(c.name) as { ms: number[]; how: string[] };
    return {
      suite,
      name: `peers.never_yields_run_ended_ms.${key(c.name)}`,
      value: round(median(e.ms)),
      unit: 'ms',
      detail: {
        deadline_ms: NEVER_YIELDS_DEADLINE_MS,
        tool_length_ms: NEVER_YIELDS_MS,
        max_ms: round(Math.max(...e.ms)),
        how_it_ended: [...new Set(e.how)].join('; '),
        trials: e.ms.length,
        mechanism: c.name.startsWith('Troupe')
          ? `tool timeoutMs ${NEVER_YIELDS_DEADLINE_MS}, graceMs ${GRACE_MS}`
          : c.name === 'OpenAI Agents JS'
            ? `tool timeoutMs ${NEVER_YIELDS_DEADLINE_MS} + run signal AbortSignal.timeout(${NEVER_YIELDS_DEADLINE_MS})`
            : c.name === 'AI SDK'
              ? `generateText timeout ${NEVER_YIELDS_DEADLINE_MS}`
              : `invoke signal AbortSignal.timeout(${NEVER_YIELDS_DEADLINE_MS})`,
        ...(c.name === 'Troupe subagent' ? { threads_after: threadsAfter } : {}),
      },
    };
  });
}

/** 5. A question to a person: what each holds while it waits (observed once each, not timed). */
async function question(): Promise<Figure[]> {
  const sup = createSupervisor({ pool: { threads: 2 }, persistence: new MemoryPersistence() });
  await sup.ready();
  let troupe: string;
  try {
    const handle = await sup.startAgent(hitlLead, { scope });
    const first = await handle.send('go');
    if (first.status !== 'suspended') throw new Error(`peers: the question run replied ${first.status}`);
    const stats = sup.stats();
    const request = sup.pendingRequests()[0];
    if (request === undefined) throw new Error('peers: no open request');
    const final = await sup.answer(request.request.id, { ok: true });
    if (final.status !== 'done') throw new Error(`peers: the answered run replied ${final.status}`);
    troupe = `send() replied suspended (the subagent's tool returned pending); while waiting: threads running ${stats.pool.running}, suspended subagents ${stats.suspendedSubagents}, open requests ${stats.pendingRequests}, state in the persistence adapter; answer() resumed it to done`;
  } finally {
    await sup.close();
  }
  const figures: Figure[] = [
    { suite, name: 'peers.question.troupe', value: 1, unit: 'observed', detail: { held: troupe } },
  ];
  for (const p of PEERS) {
    figures.push({
      suite,
      name: `peers.question.${key(p.name)}`,
      value: 1,
      unit: 'observed',
      detail: { held: await p.question() },
    });
  }
  return figures;
}

function loadavg(): string {
  try {
    return readFileSync('/proc/loadavg', 'utf8').trim();
  } catch {
    return 'unknown';
  }
}

/** The README table: rows are the workloads, columns Troupe and each peer (figures of this run). */
function markdown(figures: readonly Figure[], versions: Record<string, string>): string {
  const f = (name: string) => figures.find((x) => x.name === name);
  const v = (name: string) => f(name)?.value ?? Number.NaN;
  const d = (name: string, k: string) => f(name)?.detail?.[k];
  const cols = PEERS.map((p) => key(p.name));
  const row = (label: string, troupe: string, peer: (k: string) => string) =>
    `| ${label} | ${troupe} | ${cols.map(peer).join(' | ')} |`;
  const t1 = 'peers.trivial_run_us.';
  const t2 = 'peers.fanout_ms.';
  const t3 = 'peers.cancel_to_tool_stopped_ms.';
  const t4 = 'peers.never_yields_run_ended_ms.';
  return [
    `| workload | Troupe (${versions.troupe}) | ${PEERS.map((p) => `${p.name} (${p.version})`).join(' | ')} |`,
    `|---|---|${cols.map(() => '---').join('|')}|`,
    row(
      '1. trivial run (1 tool call, then text), µs/run, median',
      `subagent on a worker (spawn) ${v(`${t1}troupe_subagent`)}; parent in-process (startAgent+send+stopAgent) ${v(`${t1}troupe_parent`)}; raw piscina round trip ${f(`${t1}troupe_subagent`)?.baseline?.value}`,
      (k) => `${v(t1 + k)} (Troupe subagent ${d(t1 + k, 'troupe_subagent_over_this')}× of it)`,
    ),
    row(
      `2. ${FANOUT_CALLS} × ~${BURN_MS} ms CPU tool calls in one turn, wall ms, median`,
      `parent + task, 2 threads ${v(`${t2}troupe_parent_task`)} (${d(`${t2}troupe_parent_task`, 'speedup_over_sequential')}× the sequential loop's ${v(`${t2}sequential_loop`)}); ${FANOUT_CALLS} spawns ${v(`${t2}troupe_spawns`)} (${d(`${t2}troupe_spawns`, 'speedup_over_sequential')}×); raw piscina, 2 threads ${v(`${t2}raw_piscina_2_threads`)} (${d(`${t2}raw_piscina_2_threads`, 'speedup_over_sequential')}×)`,
      (k) => `${v(t2 + k)} (Troupe parent ${d(t2 + k, 'troupe_parent_speedup')}× faster)`,
    ),
    row(
      `3. cancel ${CANCEL_AFTER_MS} ms into a ${CHECKING_TOOL_MS} ms checking CPU tool: intent → tool stopped, ms, median`,
      `subagent ${v(`${t3}troupe_subagent`)} (saw it ${d(`${t3}troupe_subagent`, 'tool_saw_cancel')}); parent's in-process tool ${v(`${t3}troupe_parent`)} (saw it ${d(`${t3}troupe_parent`, 'tool_saw_cancel')}: the abort ran ${d(`${t3}troupe_parent`, 'abort_got_through_ms')} ms late)`,
      (k) =>
        `${v(t3 + k)} (tool saw it ${d(t3 + k, 'tool_saw_cancel')}; abort ran ${d(t3 + k, 'abort_got_through_ms')} ms late; run ${d(t3 + k, 'how_it_ended')})`,
    ),
    row(
      `4. tool never yields (${NEVER_YIELDS_MS / 1000} s CPU), deadline ${NEVER_YIELDS_DEADLINE_MS} ms: run ended after, ms, median`,
      `subagent ${v(`${t4}troupe_subagent`)} (${d(`${t4}troupe_subagent`, 'how_it_ended')}, graceMs ${GRACE_MS}, threads after ${d(`${t4}troupe_subagent`, 'threads_after')}); parent's in-process tool ${v(`${t4}troupe_parent`)} (${d(`${t4}troupe_parent`, 'how_it_ended')})`,
      (k) => `${v(t4 + k)} (${d(t4 + k, 'how_it_ended')}; ${d(t4 + k, 'mechanism')})`,
    ),
    row('5. a question to a person (observed, not timed)', String(d('peers.question.troupe', 'held')), (k) =>
      String(d(`peers.question.${k}`, 'held')),
    ),
  ].join('\n');
}

async function loadPeers(): Promise<readonly Peer[]> {
  const [{ openaiAgentsPeer }, { aiSdkPeer }, { langGraphPeer }] = await Promise.all([
    import('../peers/openaiAgents.js'),
    import('../peers/aiSdk.js'),
    import('../peers/langGraph.js'),
  ]);
  return [openaiAgentsPeer, aiSdkPeer, langGraphPeer];
}

/** Issue 16.7's table: Troupe and its peers on the same scripted workloads. */
export const peersSuite: SuiteBody = {
  async run(ctx) {
    PEERS = await loadPeers();
    const versions: Record<string, string> = { troupe: troupeVersion() };
    for (const p of PEERS) versions[key(p.name)] = p.version;
    ctx.progress('peers: calibrating the CPU loop');
    const burnIterations = calibrate(BURN_MS);
    const per = burnIterations / BURN_MS;
    const figures: Figure[] = [];
    figures.push(...(await trivial(ctx)));
    figures.push(...(await fanout(ctx, burnIterations)));
    figures.push(...(await cancel(ctx, Math.round(per * CHECKING_TOOL_MS))));
    figures.push(...(await deadline(ctx, Math.round(per * NEVER_YIELDS_MS))));
    figures.push(...(await question()));
    figures.push({
      suite,
      name: 'peers.context',
      value: burnIterations,
      unit: 'iterations per 20 ms',
      detail: { ...versions, node: process.version, loadavg_at_end: loadavg() },
    });
    ctx.progress(`peers: the README table (loadavg ${loadavg()}):\n${markdown(figures, versions)}`);
    return figures;
  },
};
