// A model-based driver of the public API: plays a generated scenario (a
// sequence of host operations issued at random moments, without waiting for
// what they started) against a real supervisor with worker threads, then
// checks invariants every user relies on. Returns the violations found (an
// empty list: every invariant held). No timers are used to synchronise:
// waits are on events; a hang is caught by a watchdog thread (Atomics.wait
// with a time limit, in a worker of its own), never by a sleep.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { sqlitePersistence } from '@troupe/sqlite';
import { type AgentHandle, type AgentReply, createSupervisor, type Supervisor } from '@troupe/supervisor';
import fc from 'fast-check';
import { type Decision, type LeadPlan, lead, type SubPlan, sub1 } from './agents.js';

// ── Generated input ─────────────────────────────────────────────────────────

/** A subagent plan before its nonce is given (at play time). */
export type Sub =
  | { readonly k: 'quick' | 'tmo' | 'spin' | 'mfail' | 'exit'; readonly u: number }
  | { readonly k: 'ask'; readonly u: number; readonly exp: boolean }
  | { readonly k: 'crunch'; readonly u: number; readonly iters: number }
  | { readonly k: 'flaky'; readonly u: number; readonly fails: number }
  | { readonly k: 'approve'; readonly u: number; readonly d: Decision }
  | { readonly k: 'nest'; readonly u: number; readonly child: Sub };

export type Own = LeadPlan['own'];

export type Op =
  | { readonly t: 'start' }
  | { readonly t: 'send'; readonly a: number; readonly items: readonly Sub[]; readonly own: Own; readonly u: number }
  | { readonly t: 'spawn'; readonly sub: Sub }
  | { readonly t: 'cancel'; readonly pick: number }
  | { readonly t: 'answer'; readonly pick: number; readonly ok: boolean }
  | { readonly t: 'answerStored'; readonly pick: number; readonly ok: boolean }
  | { readonly t: 'wait'; readonly events: number }
  | { readonly t: 'ticks'; readonly k: number }
  | { readonly t: 'stop'; readonly a: number }
  | { readonly t: 'restartAgent'; readonly a: number }
  | { readonly t: 'resume'; readonly a: number }
  | { readonly t: 'restart'; readonly how: 'close' | 'destroy'; readonly timeoutMs: number }
  | { readonly t: 'close'; readonly timeoutMs: number }
  | { readonly t: 'destroy' };

export type Store = 'memory' | 'sqlite' | 'none';

export interface Scenario {
  readonly store: Store;
  readonly subagentTimeoutMs?: number | undefined;
  readonly ops: readonly Op[];
  /** How it ends: answer everything then close, close at once with a timeout, or destroy. */
  readonly end: { readonly how: 'drain' | 'close' | 'destroy'; readonly timeoutMs: number };
}

const u = fc.integer({ min: 0, max: 9 });
/** fast-check wants integer weights: tenths. */
const W = (w: number): number => Math.round(w * 10);
// Leave out what weighs nothing.
function oneof<T>(...items: { arbitrary: fc.Arbitrary<T>; weight: number }[]): fc.Arbitrary<T> {
  return fc.oneof(...items.filter((i) => i.weight > 0));
}
const leafKinds = (weights: Record<string, number>): fc.Arbitrary<Sub> =>
  oneof<Sub>(
    { arbitrary: fc.record({ k: fc.constant('quick' as const), u }), weight: W(weights.quick ?? 2) },
    { arbitrary: fc.record({ k: fc.constant('ask' as const), u, exp: fc.boolean() }), weight: W(weights.ask ?? 4) },
    {
      arbitrary: fc.record({ k: fc.constant('crunch' as const), u, iters: fc.integer({ min: 1, max: 120 }) }),
      weight: W(weights.crunch ?? 2),
    },
    { arbitrary: fc.record({ k: fc.constant('tmo' as const), u }), weight: W(weights.tmo ?? 1) },
    { arbitrary: fc.record({ k: fc.constant('spin' as const), u }), weight: W(weights.spin ?? 0) },
    {
      arbitrary: fc.record({ k: fc.constant('flaky' as const), u, fails: fc.integer({ min: 0, max: 2 }) }),
      weight: W(weights.flaky ?? 1),
    },
    {
      arbitrary: fc.record({
        k: fc.constant('approve' as const),
        u,
        d: fc.constantFrom<Decision>('approve', 'reject', 'ask', 'edit'),
      }),
      weight: W(weights.approve ?? 2),
    },
    { arbitrary: fc.record({ k: fc.constant('mfail' as const), u }), weight: W(weights.mfail ?? 1) },
    { arbitrary: fc.record({ k: fc.constant('exit' as const), u }), weight: W(weights.exit ?? 0) },
  );

export function subArb(weights: Record<string, number> = {}): fc.Arbitrary<Sub> {
  const leaf = leafKinds(weights);
  return oneof<Sub>(
    { arbitrary: leaf, weight: W(5) },
    { arbitrary: fc.record({ k: fc.constant('nest' as const), u, child: leaf }), weight: W(weights.nest ?? 2) },
  );
}

export interface OpWeights {
  readonly subs?: Record<string, number>;
  readonly stop?: number;
  readonly restart?: number;
  readonly midClose?: number;
  readonly spawn?: number;
}

export function opArb(w: OpWeights = {}): fc.Arbitrary<Op> {
  const sub = subArb(w.subs);
  return oneof<Op>(
    { arbitrary: fc.constant<Op>({ t: 'start' }), weight: W(1) },
    {
      arbitrary: fc.record({
        t: fc.constant('send' as const),
        a: fc.nat(7),
        items: fc.array(sub, { minLength: 0, maxLength: 3 }),
        own: fc.constantFrom<Own>('none', 'none', 'ask', 'approve', 'approve-ask'),
        u,
      }),
      weight: W(5),
    },
    { arbitrary: fc.record({ t: fc.constant('spawn' as const), sub }), weight: W(w.spawn ?? 2) },
    { arbitrary: fc.record({ t: fc.constant('cancel' as const), pick: fc.nat(50) }), weight: W(3) },
    { arbitrary: fc.record({ t: fc.constant('answer' as const), pick: fc.nat(20), ok: fc.boolean() }), weight: W(5) },
    { arbitrary: fc.record({ t: fc.constant('wait' as const), events: fc.integer({ min: 1, max: 8 }) }), weight: W(4) },
    { arbitrary: fc.record({ t: fc.constant('ticks' as const), k: fc.integer({ min: 0, max: 4 }) }), weight: W(2) },
    { arbitrary: fc.record({ t: fc.constant('stop' as const), a: fc.nat(7) }), weight: W(w.stop ?? 1) },
    { arbitrary: fc.record({ t: fc.constant('restartAgent' as const), a: fc.nat(7) }), weight: W(w.stop ?? 1) },
    {
      arbitrary: fc.record({
        t: fc.constant('restart' as const),
        how: fc.constantFrom('close' as const, 'destroy' as const),
        timeoutMs: fc.integer({ min: 0, max: 60 }),
      }),
      weight: W(w.restart ?? 0),
    },
    {
      arbitrary: fc.record({ t: fc.constant('answerStored' as const), pick: fc.nat(20), ok: fc.boolean() }),
      weight: W(w.restart ?? 0),
    },
    { arbitrary: fc.record({ t: fc.constant('resume' as const), a: fc.nat(7) }), weight: W(w.restart ?? 0) },
    {
      arbitrary: fc.record({ t: fc.constant('close' as const), timeoutMs: fc.integer({ min: 0, max: 60 }) }),
      weight: W(w.midClose ?? 0),
    },
    { arbitrary: fc.constant<Op>({ t: 'destroy' }), weight: W(w.midClose ?? 0) },
  );
}

export function scenarioArb(
  store: Store | fc.Arbitrary<Store>,
  w: OpWeights = {},
  maxOps = 14,
): fc.Arbitrary<Scenario> {
  return fc.record({
    store: typeof store === 'string' ? fc.constant(store) : store,
    subagentTimeoutMs: fc.option(fc.integer({ min: 60, max: 400 }), { nil: undefined, freq: 4 }),
    ops: fc.array(opArb(w), { minLength: 1, maxLength: maxOps }).map((ops) => [{ t: 'start' } as Op, ...ops]),
    end: fc.record({
      how: fc.constantFrom('drain' as const, 'drain' as const, 'close' as const, 'destroy' as const),
      timeoutMs: fc.integer({ min: 0, max: 80 }),
    }),
  });
}

// ── The watchdog: a thread that wakes us if nothing settles in time ────────

const WATCHDOG_SOURCE = `
const { parentPort } = require('node:worker_threads');
parentPort.on('message', ({ buf, ms }) => {
  const cell = new Int32Array(buf);
  parentPort.postMessage(Atomics.wait(cell, 0, 0, ms));
});
`;

class Watchdog {
  readonly #worker: Worker;
  #waiting: ((result: string) => void) | undefined;
  constructor() {
    this.#worker = new Worker(WATCHDOG_SOURCE, { eval: true });
    this.#worker.unref();
    this.#worker.on('message', (result: string) => {
      const w = this.#waiting;
      this.#waiting = undefined;
      w?.(result);
    });
  }

  /** `promise`, or 'hang' if it has not settled after `ms` of real time. */
  async race<T>(
    promise: Promise<T>,
    ms: number,
  ): Promise<{ readonly hang: true } | { readonly hang: false; readonly value: T }> {
    const cell = new Int32Array(new SharedArrayBuffer(4));
    const fired = new Promise<'timed-out'>((resolve) => {
      this.#waiting = (r) => {
        if (r === 'timed-out') resolve('timed-out');
      };
    });
    this.#worker.ref();
    this.#worker.postMessage({ buf: cell.buffer, ms });
    const settled = promise.then(
      (value) => ({ hang: false as const, value }),
      () => ({ hang: false as const, value: undefined as T }),
    );
    try {
      const result = await Promise.race([settled, fired.then(() => ({ hang: true as const }))]);
      return result;
    } finally {
      Atomics.store(cell, 0, 1);
      Atomics.notify(cell, 0);
      // The worker answers 'ok' to the wake-up; wait for it so the next race gets its own answer.
      await new Promise<void>((resolve) => {
        if (this.#waiting === undefined) resolve();
        else this.#waiting = () => resolve();
      });
      this.#worker.unref();
    }
  }

  terminate(): Promise<number> {
    return this.#worker.terminate();
  }
}

let watchdog: Watchdog | undefined;
export function theWatchdog(): Watchdog {
  watchdog ??= new Watchdog();
  return watchdog;
}
export async function stopWatchdog(): Promise<void> {
  await watchdog?.terminate();
  watchdog = undefined;
}

// ── Process-level hooks ─────────────────────────────────────────────────────

const processErrors: string[] = [];
let hooked = false;
export function hookProcess(): void {
  if (hooked) return;
  hooked = true;
  process.on('unhandledRejection', (reason) => {
    processErrors.push(`unhandledRejection: ${(reason as Error)?.stack ?? String(reason)}`);
  });
  process.on('uncaughtException', (error) => {
    processErrors.push(`uncaughtException: ${error?.stack ?? String(error)}`);
  });
}

// ── Playing a scenario ──────────────────────────────────────────────────────

const SCOPE = Object.freeze({ tenantId: 't1', userId: 'u1' });
const EVENT_NAMES = [
  'agent.started',
  'agent.run.started',
  'agent.turn',
  'agent.done',
  'agent.failed',
  'agent.cancelled',
  'agent.suspended',
  'agent.incomplete',
  'agent.restarted',
  'agent.stopped',
  'tool.execute.start',
  'tool.execute.stop',
  'tool.execute.exception',
  'tool.execute.timeout',
  'tool.approval.invalid',
  'model.start',
  'model.stop',
  'model.error',
  'subagent.spawned',
  'subagent.done',
  'subagent.failed',
  'subagent.crashed',
  'subagent.cancelled',
  'subagent.incomplete',
  'subagent.suspended',
  'request.opened',
  'request.answered',
  'request.withdrawn',
  'host.refused',
  'worker.recycled',
  'persistence.failed',
] as const;
const TERMINAL = new Set([
  'agent.done',
  'agent.failed',
  'agent.cancelled',
  'agent.incomplete',
  'subagent.done',
  'subagent.failed',
  'subagent.crashed',
  'subagent.cancelled',
  'subagent.incomplete',
]);
const REPLY_STATUSES = new Set(['done', 'suspended', 'failed', 'cancelled', 'incomplete']);
const OUTCOME_STATUSES = new Set(['done', 'suspended', 'failed', 'crashed', 'cancelled', 'incomplete']);

interface Logged {
  readonly i: number;
  readonly gen: number;
  readonly name: string;
  readonly e: Record<string, unknown> & { runId?: string; agentId?: string; path?: readonly string[] };
}

interface Tracked {
  readonly what: string;
  readonly gen: number;
  settled: boolean;
  readonly p: Promise<unknown>;
}

interface AgentRec {
  readonly id: string;
  handle: AgentHandle | undefined;
  gen: number;
}

const TOKEN_KEYS = ['inputTokens', 'outputTokens', 'cachedInputTokens', 'reasoningTokens'] as const;

function checkUsage(where: string, usage: unknown, total: unknown, out: string[]): void {
  for (const [name, value] of [
    ['usage', usage],
    ['totalUsage', total],
  ] as const) {
    if (typeof value !== 'object' || value === null) {
      out.push(`${where}: ${name} is ${JSON.stringify(value)}, not a usage object`);
      return;
    }
    for (const k of TOKEN_KEYS) {
      const v = (value as Record<string, unknown>)[k];
      if (v === undefined && (k === 'cachedInputTokens' || k === 'reasoningTokens')) continue;
      if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0)
        out.push(`${where}: ${name}.${k} is ${JSON.stringify(v)}, not a non-negative integer`);
    }
  }
  for (const k of TOKEN_KEYS) {
    const a = ((usage as Record<string, number>)[k] ?? 0) as number;
    const b = ((total as Record<string, number>)[k] ?? 0) as number;
    if (b < a) out.push(`${where}: totalUsage.${k} (${b}) < usage.${k} (${a})`);
  }
}

// Walk a result (JSON strings inside are parsed) for the answers tools got: each must be its own run's.
function checkAnswers(where: string, value: unknown, out: string[], depth = 0): void {
  if (depth > 12) return;
  if (typeof value === 'string') {
    if (value.startsWith('{') || value.startsWith('[')) {
      try {
        checkAnswers(where, JSON.parse(value), out, depth + 1);
      } catch {
        // not JSON
      }
    }
    return;
  }
  if (Array.isArray(value)) {
    for (const v of value) checkAnswers(where, v, out, depth + 1);
    return;
  }
  if (typeof value === 'object' && value !== null) {
    const o = value as Record<string, unknown>;
    if ('got' in o && 'n' in o && o.got !== o.n) {
      out.push(`${where}: the tool of run ${String(o.n)} got the answer meant for ${JSON.stringify(o.got)}`);
    }
    for (const v of Object.values(o)) checkAnswers(where, v, out, depth + 1);
  }
}

function errorCode(error: unknown): string {
  return String((error as { code?: unknown })?.code ?? (error as Error)?.name ?? 'unknown');
}

export interface PlayResult {
  readonly violations: string[];
  readonly log: string[];
}

export interface PlayOptions {
  /** Real time a step may take before it counts as a hang. */
  readonly hangMs?: number;
  readonly dir?: string;
}

export async function play(scenario: Scenario, options: PlayOptions = {}): Promise<PlayResult> {
  hookProcess();
  const hangMs = options.hangMs ?? 15_000;
  const dog = theWatchdog();
  const violations: string[] = [];
  const trace: string[] = [];
  const errorsBefore = processErrors.length;
  const log: Logged[] = [];
  const tracked: Tracked[] = [];
  const agents: AgentRec[] = [];
  const announced: string[] = [];
  const cancels: { gen: number; id: string; at: number }[] = [];
  let nonce = 0;
  const answering = new Set<string>();
  const stopsAfter = new Set<string>();
  let gen = 0;
  let sup!: Supervisor;
  let closedAt: number | undefined; // log index at which the current gen was closed
  // From close()/destroy() on, suspended conversations leave this supervisor's list (they stay in
  // the store for the next one): a reply settling meanwhile is not checked against pendingRequests().
  let closing = false;
  const closedGens = new Map<number, number>();
  let eventWaiter: { left: number; resolve: () => void } | undefined;
  const baseline = resourceCounts();
  const file = scenario.store === 'sqlite' ? `${options.dir as string}/fuzz.sqlite` : undefined;

  const approval = (req: { arguments: unknown }) => {
    const args = (req.arguments ?? {}) as { d?: string; n?: string };
    switch (args.d) {
      case 'reject':
        return { decision: 'reject' as const, reason: 'no' };
      case 'edit':
        return { decision: 'edit' as const, arguments: { ...args, d: 'edited' } };
      case 'ask':
        return { decision: 'ask' as const, prompt: `approve:${String(args.n)}` };
      default:
        return { decision: 'approve' as const };
    }
  };

  const open = (): Supervisor => {
    gen++;
    closedAt = undefined;
    closing = false;
    const s = createSupervisor({
      agents: [lead],
      pool: { threads: 2, graceMs: 100 },
      approval,
      ...(scenario.store === 'none'
        ? { persistence: null }
        : scenario.store === 'sqlite'
          ? { persistence: sqlitePersistence({ file: file as string }) }
          : {}),
      ...(scenario.subagentTimeoutMs === undefined ? {} : { subagentTimeoutMs: scenario.subagentTimeoutMs }),
    }) as Supervisor;
    const g = gen;
    for (const name of EVENT_NAMES) {
      s.on(name, ((e: Logged['e']) => {
        log.push({ i: log.length, gen: g, name, e });
        if (name === 'agent.run.started' || name === 'subagent.spawned') {
          if (e.agentId !== undefined && !announced.includes(e.agentId)) announced.push(e.agentId);
        }
        const w = eventWaiter;
        if (w !== undefined && --w.left <= 0) {
          eventWaiter = undefined;
          w.resolve();
        }
      }) as never);
    }
    return s;
  };

  const track = (what: string, p: Promise<unknown>, onValue?: (v: unknown) => void): void => {
    const t: Tracked = { what, gen, settled: false, p };
    tracked.push(t);
    p.then(
      (v) => {
        t.settled = true;
        trace.push(`  ${what} -> ${summarize(v)}`);
        try {
          onValue?.(v);
        } catch (error) {
          violations.push(`${what}: checking its value threw ${(error as Error).stack}`);
        }
      },
      (error: unknown) => {
        t.settled = true;
        trace.push(`  ${what} -> rejected ${errorCode(error)}: ${(error as Error)?.message}`);
      },
    );
  };

  const onReply = (what: string, rootAgent: string, g: number) => (v: unknown) => {
    const reply = v as AgentReply;
    const at = log.length;
    if (!REPLY_STATUSES.has(reply?.status)) {
      violations.push(`${what}: reply status ${JSON.stringify(reply?.status)} is not one of ${[...REPLY_STATUSES]}`);
      return;
    }
    checkUsage(what, reply.usage, reply.totalUsage, violations);
    if (reply.status === 'done') checkAnswers(what, reply.text, violations);
    matchReply(what, rootAgent, g, reply.status, at, reply.status === 'suspended' ? reply.request.id : undefined);
    if (reply.status === 'suspended') {
      const id = reply.request.id;
      const listed =
        g === gen && closedAt === undefined && !closing && sup.pendingRequests().some((p) => p.request.id === id);
      const gone = log.some(
        (l) => l.gen === g && (l.name === 'request.answered' || l.name === 'request.withdrawn') && l.e.requestId === id,
      );
      if (!listed && !gone && g === gen && closedAt === undefined && !closing)
        violations.push(
          `${what}: suspended on ${id}, which pendingRequests() does not list (and was not answered or withdrawn)`,
        );
    }
  };

  // A terminal (or suspended) reply of root agent A comes after A's root run ended (or suspended) with that status.
  const matchReply = (
    what: string,
    rootAgent: string,
    g: number,
    status: string,
    at: number,
    requestId: string | undefined,
  ): void => {
    const want =
      status === 'suspended'
        ? ['agent.suspended', 'subagent.suspended']
        : status === 'failed'
          ? ['agent.failed', 'subagent.failed', 'subagent.crashed']
          : [`agent.${status}`, `subagent.${status}`];
    // The latest outcome (terminal or suspended) of that root before the reply must be the reply's.
    let latest: Logged | undefined;
    for (const l of log) {
      if (l.i >= at || l.gen !== g) continue;
      if (!TERMINAL.has(l.name) && !l.name.endsWith('.suspended')) continue;
      const path = l.e.path;
      const isRoot = path === undefined ? l.e.agentId === rootAgent : path.length === 1 && path[0] === rootAgent;
      if (isRoot) latest = l;
    }
    void requestId;
    if (latest !== undefined && want.includes(latest.name)) return;
    // A message dropped from the mailbox (or refused at shutdown) never ran.
    if (status === 'cancelled') return;
    violations.push(
      `${what}: its ${status} reply arrived while the latest outcome event of its root ${rootAgent} was ${latest === undefined ? 'none' : `${latest.name} #${latest.i}`}`,
    );
  };

  const onOutcome = (what: string, g: number) => (v: unknown) => {
    const o = v as { status: string; runId: string; usage: unknown; totalUsage: unknown; result?: unknown };
    if (!OUTCOME_STATUSES.has(o?.status)) {
      violations.push(`${what}: outcome status ${JSON.stringify(o?.status)} is not a SubagentOutcome status`);
      return;
    }
    checkUsage(what, o.usage, o.totalUsage, violations);
    if (o.status === 'done') checkAnswers(what, o.result, violations);
    const want = o.status === 'suspended' ? 'subagent.suspended' : `subagent.${o.status}`;
    if (!log.some((l) => l.gen === g && l.e.runId === o.runId && l.name === want))
      violations.push(`${what}: outcome ${o.status} of run ${o.runId} arrived before its ${want} event`);
  };

  const subPlan = (s: Sub): SubPlan => {
    const n = `n${++nonce}`;
    if (s.k === 'nest') return { ...s, n, child: subPlan(s.child) } as SubPlan;
    return { ...s, n } as SubPlan;
  };

  const agentAt = (a: number): AgentRec | undefined => (agents.length === 0 ? undefined : agents[a % agents.length]);

  const answerListed = (pick: number, ok: boolean): void => {
    // Known (pendingRequests-lag.test.ts): a request stays listed while an answer to it is being taken.
    const list = sup.pendingRequests().filter((p) => !answering.has(p.request.id));
    if (list.length === 0) return;
    const info = list[pick % list.length];
    if (info === undefined) return;
    const id = info.request.id;
    const n = (info.request.data as { n?: unknown } | undefined)?.n ?? null;
    const what = `answer(${id} ${info.request.prompt}, ${ok ? 'ok' : 'decline'}) [gen ${gen}]`;
    trace.push(what);
    answering.add(id);
    let p: Promise<AgentReply>;
    try {
      p = sup.answer(id, ok ? { ok, data: { n } } : { ok, reason: 'declined by the fuzz' });
    } catch (error) {
      violations.push(`${what}: threw synchronously ${errorCode(error)}`);
      return;
    }
    const g = gen;
    const root = info.agentId;
    const cancelsAtIssue = cancels.length;
    const closingAtIssue = closing;
    track(what, p, onReply(what, root, g));
    p.catch((error: unknown) => {
      // Known (answerThenStop.test.ts): a stopAgent() after the answer makes it ERR_UNKNOWN_REQUEST.
      if (stopsAfter.has(root) && process.env.TROUPE_FUZZ_STRICT !== '1') return;
      // A cancel after the answer (its store write still in flight) withdraws the request: the cancel wins.
      if (cancels.length > cancelsAtIssue && errorCode(error) === 'ERR_UNKNOWN_REQUEST') return;
      // A close or destroy of this supervisor after the answer (its store write still in flight)
      // ends it ERR_CLOSED: the shutdown wins, and the store keeps the answer for the next one.
      if (!closingAtIssue && (closing || gen !== g) && errorCode(error) === 'ERR_CLOSED') return;
      violations.push(
        `${what}: a request pendingRequests() listed was refused in the same tick: ${errorCode(error)} ${(error as Error)?.message}`,
      );
    });
  };

  const closeGen = async (how: 'close' | 'destroy', timeoutMs: number): Promise<void> => {
    const s = sup;
    const g = gen;
    const what = how === 'close' ? `close({timeoutMs: ${timeoutMs}}) [gen ${g}]` : `destroy() [gen ${g}]`;
    trace.push(what);
    closing = true;
    const p = how === 'close' ? s.close({ timeoutMs }) : s.destroy();
    track(what, p);
    const r = await dog.race(p, hangMs);
    if (r.hang) {
      violations.push(`${what}: did not settle within ${hangMs} ms`);
      throw new Hang();
    }
    closedAt = log.length;
    closedGens.set(g, log.length);
    const st = s.stats();
    const bad: string[] = [];
    if (st.runs !== 0) bad.push(`runs ${st.runs}`);
    if (st.pool.running !== 0) bad.push(`running ${st.pool.running}`);
    if (st.suspendedSubagents !== 0) bad.push(`suspendedSubagents ${st.suspendedSubagents}`);
    if (st.pool.queued !== 0) bad.push(`queued ${st.pool.queued}`);
    if (st.pool.openPorts !== 0) bad.push(`openPorts ${st.pool.openPorts}`);
    if (st.agents !== 0) bad.push(`agents ${st.agents}`);
    if (bad.length > 0) violations.push(`${what}: stats() after it resolved: ${bad.join(', ')}`);
  };

  try {
    sup = open();
    for (const op of scenario.ops) {
      trace.push(`op ${JSON.stringify(op)}`);
      switch (op.t) {
        case 'start': {
          const p = sup.startAgent(lead, { scope: SCOPE });
          const what = `startAgent [gen ${gen}]`;
          const g = gen;
          track(what, p, (h) => {
            const handle = h as AgentHandle;
            agents.push({ id: handle.id, handle, gen: g });
          });
          await dog.race(p, hangMs).then((r) => {
            if (r.hang) violations.push(`${what}: hung`);
          });
          break;
        }
        case 'send': {
          const rec = agentAt(op.a);
          if (rec?.handle === undefined) break;
          const plan: LeadPlan = { n: `n${++nonce}`, u: op.u, items: op.items.map(subPlan), own: op.own };
          const what = `send(${rec.id}, ${plan.n}) [gen ${rec.gen}]`;
          let p: Promise<AgentReply>;
          try {
            p = rec.handle.send(JSON.stringify(plan));
          } catch (error) {
            violations.push(`${what}: threw synchronously ${errorCode(error)} (a promise API should reject)`);
            break;
          }
          track(what, p, onReply(what, rec.id, rec.gen));
          break;
        }
        case 'spawn': {
          const plan = subPlan(op.sub);
          const what = `spawn(${plan.n}) [gen ${gen}]`;
          let p: Promise<unknown>;
          try {
            p = sup.spawn(sub1, { input: JSON.stringify(plan), scope: SCOPE });
          } catch (error) {
            violations.push(`${what}: threw synchronously ${errorCode(error)}`);
            break;
          }
          track(what, p, onOutcome(what, gen));
          break;
        }
        case 'cancel': {
          if (announced.length === 0) break;
          const id = announced[op.pick % announced.length] as string;
          let r: boolean;
          try {
            r = sup.cancel(id);
          } catch (error) {
            trace.push(`  cancel(${id}) threw ${errorCode(error)}`);
            break;
          }
          trace.push(`  cancel(${id}) -> ${r}`);
          if (r) cancels.push({ gen, id, at: log.length });
          break;
        }
        case 'answer':
          if (closedAt === undefined) answerListed(op.pick, op.ok);
          break;
        case 'answerStored': {
          if (scenario.store === 'none' || closedAt !== undefined) break;
          let page: Awaited<ReturnType<Supervisor['listRequests']>>;
          try {
            page = await sup.listRequests(SCOPE);
          } catch (error) {
            trace.push(`  listRequests rejected ${errorCode(error)}`);
            break;
          }
          const items = page.items.filter((p) => !answering.has(p.request.id));
          const info = items[op.pick % Math.max(1, items.length)];
          if (info === undefined) break;
          const id = info.request.id;
          answering.add(id);
          const n = (info.request.data as { n?: unknown } | undefined)?.n ?? null;
          const what = `answer(${id} ${info.request.prompt}, ${op.ok ? 'ok' : 'decline'}, {scope}) [gen ${gen}]`;
          const at = log.length;
          const p = sup.answer(id, op.ok ? { ok: true, data: { n } } : { ok: false }, { scope: SCOPE });
          track(what, p, onReply(what, info.agentId, gen));
          const g = gen;
          p.catch((error: unknown) => {
            const code = errorCode(error);
            const withdrawn = log.some(
              (l) => l.gen === g && l.i >= at && l.name === 'request.withdrawn' && l.e.requestId === id,
            );
            if (code === 'ERR_CLOSED' || withdrawn) return;
            violations.push(
              `${what}: a request listRequests(scope) listed was refused: ${code} ${(error as Error)?.message}`,
            );
          });
          break;
        }
        case 'wait': {
          const busy = tracked.some((t) => !t.settled) && closedAt === undefined;
          if (!busy) break;
          const st = sup.stats();
          const running =
            st.pool.running + st.pool.queued > 0 || agents.some((a) => a.gen === gen && a.handle?.status === 'running');
          if (!running) break;
          const got = new Promise<void>((resolve) => {
            eventWaiter = { left: op.events, resolve };
          });
          const pendingSettles = Promise.race(
            tracked
              .filter((t) => !t.settled)
              .map((t) =>
                t.p.then(
                  () => {},
                  () => {},
                ),
              ),
          );
          const r = await dog.race(Promise.race([got, pendingSettles]), hangMs);
          eventWaiter = undefined;
          if (r.hang) {
            violations.push(
              `wait: runs were running (${JSON.stringify(st)}) but no event arrived and nothing settled for ${hangMs} ms`,
            );
            throw new Hang();
          }
          break;
        }
        case 'ticks':
          for (let i = 0; i < op.k; i++) await new Promise<void>((resolve) => setImmediate(resolve));
          break;
        case 'stop': {
          const rec = agentAt(op.a);
          if (rec === undefined || closedAt !== undefined || rec.gen !== gen) break;
          const what = `stopAgent(${rec.id}) [gen ${gen}]`;
          stopsAfter.add(rec.id);
          track(what, sup.stopAgent(rec.id));
          rec.handle = undefined;
          break;
        }
        case 'restartAgent': {
          const rec = agentAt(op.a);
          if (rec === undefined || closedAt !== undefined) break;
          if (rec.handle !== undefined && rec.gen === gen) break;
          const what = `startAgent(${rec.id}) again [gen ${gen}]`;
          const g = gen;
          const p = sup.startAgent(lead, { scope: SCOPE, agentId: rec.id });
          track(what, p, (h) => {
            rec.handle = h as AgentHandle;
            rec.gen = g;
          });
          await dog.race(p, hangMs).then((r) => {
            if (r.hang) violations.push(`${what}: hung`);
          });
          break;
        }
        case 'resume': {
          const rec = agentAt(op.a);
          if (rec?.handle === undefined || rec.handle.status !== 'interrupted') break;
          const what = `resume(${rec.id}) [gen ${rec.gen}]`;
          track(what, rec.handle.resume(), onReply(what, rec.id, rec.gen));
          break;
        }
        case 'restart': {
          if (scenario.store !== 'sqlite') break;
          if (closedAt === undefined) await closeGen(op.how, op.timeoutMs);
          sup = open();
          for (const rec of agents) {
            const what = `startAgent(${rec.id}) after restart [gen ${gen}]`;
            const g = gen;
            const p = sup.startAgent(lead, { scope: SCOPE, agentId: rec.id });
            track(what, p, (h) => {
              rec.handle = h as AgentHandle;
              rec.gen = g;
            });
            const r = await dog.race(p, hangMs);
            if (r.hang) violations.push(`${what}: hung`);
            await p.catch(() => {});
          }
          break;
        }
        case 'close':
        case 'destroy':
          if (closedAt !== undefined) break;
          await closeGen(op.t, op.t === 'close' ? op.timeoutMs : 0);
          break;
      }
    }

    // The end: answer what is open until nothing is (bounded), then close or destroy.
    if (closedAt === undefined) {
      if (scenario.end.how === 'drain') {
        for (let round = 0; round < 40; round++) {
          const list = sup.pendingRequests().filter((p) => !answering.has(p.request.id));
          const unsettled = tracked.filter((t) => !t.settled);
          if (list.length === 0 && unsettled.length === 0) break;
          if (list.length > 0) answerListed(round, round % 3 !== 2);
          const waitFor = tracked
            .filter((t) => !t.settled)
            .map((t) =>
              t.p.then(
                () => {},
                () => {},
              ),
            );
          const opened = new Promise<void>((resolve) => {
            eventWaiter = { left: 1_000_000, resolve };
            const onOpen = (): void => {
              sup.off('request.opened', onOpen);
              resolve();
            };
            sup.on('request.opened', onOpen);
          });
          if (waitFor.length === 0) break;
          const r = await dog.race(Promise.race([...waitFor, opened]), hangMs);
          eventWaiter = undefined;
          if (r.hang) {
            const st = sup.stats();
            violations.push(
              `drain: nothing settled and no request opened for ${hangMs} ms; open: ${tracked
                .filter((t) => !t.settled)
                .map((t) => t.what)
                .join('; ')}; pendingRequests ${sup.pendingRequests().length}; stats ${JSON.stringify(st)}`,
            );
            break;
          }
        }
      }
      await closeGen(scenario.end.how === 'destroy' ? 'destroy' : 'close', scenario.end.timeoutMs);
    }

    // Every promise settles.
    const all = Promise.allSettled(tracked.map((t) => t.p));
    const r = await dog.race(all, hangMs);
    if (r.hang) {
      violations.push(
        `after close: promises never settled: ${tracked
          .filter((t) => !t.settled)
          .map((t) => t.what)
          .join('; ')}`,
      );
    }
  } catch (error) {
    if (!(error instanceof Hang)) violations.push(`the harness threw: ${(error as Error)?.stack ?? String(error)}`);
    try {
      await dog.race(sup.destroy(), hangMs);
    } catch {
      // reported already
    }
  }

  // Leaks: what keeps the event loop alive now that every supervisor is closed.
  await new Promise<void>((resolve) => setImmediate(resolve));
  const after = resourceCounts();
  const leaked = diffCounts(baseline, after);
  if (leaked.length > 0) violations.push(`after close, active resources grew: ${leaked.join(', ')}`);

  checkLog(log, cancels, closedGens, violations);
  const errs = processErrors.slice(errorsBefore);
  for (const e of errs) violations.push(e);
  const lines = [...trace];
  if (violations.length > 0) {
    lines.push('--- events ---');
    for (const l of log.slice(-200)) {
      lines.push(
        `${l.i} g${l.gen} ${l.name} ${l.e.agentId ?? ''} ${l.e.runId ?? ''} ${(l.e as { requestId?: string }).requestId ?? ''} ${(l.e as { reason?: string }).reason ?? ''} ${(l.e as { toolName?: string }).toolName ?? ''}`,
      );
    }
  }
  return { violations: [...new Set(violations)], log: lines };
}

class Hang extends Error {}

function summarize(v: unknown): string {
  if (v === undefined) return 'undefined';
  const o = v as { status?: string; text?: string; reason?: string; error?: Error; request?: { id: string } };
  if (typeof o?.status === 'string') {
    return `${o.status}${o.reason ? ` ${o.reason}` : ''}${o.request ? ` ${o.request.id}` : ''}${o.error ? ` ${(o.error as { code?: string }).code ?? ''} ${o.error.message}` : ''}`;
  }
  if (typeof (v as { id?: unknown }).id === 'string') return `handle ${(v as { id: string }).id}`;
  return typeof v;
}

function resourceCounts(): Map<string, number> {
  const m = new Map<string, number>();
  for (const r of process.getActiveResourcesInfo()) m.set(r, (m.get(r) ?? 0) + 1);
  return m;
}

function diffCounts(before: Map<string, number>, after: Map<string, number>): string[] {
  const out: string[] = [];
  for (const [k, v] of after) {
    if (k === 'Timeout' || k === 'Immediate') continue;
    const b = before.get(k) ?? 0;
    if (v > b) out.push(`${k} ${b} -> ${v}`);
  }
  return out;
}

// Per-run checks over the whole log.
function checkLog(
  log: readonly Logged[],
  cancels: readonly { gen: number; id: string; at: number }[],
  closedGens: ReadonlyMap<number, number>,
  out: string[],
): void {
  const first = new Map<string, number>();
  const end = new Map<string, Logged>();
  const pathOf = new Map<string, readonly string[]>();
  for (const l of log) {
    const runId = l.e.runId;
    if (typeof runId !== 'string') continue;
    const key = `${l.gen}:${runId}`;
    if (!first.has(key)) first.set(key, l.i);
    if (l.e.path !== undefined && !pathOf.has(key)) pathOf.set(key, l.e.path);
    const ended = end.get(key);
    // Known (lateRefusal.test.ts): a run cut off during a nested task call gets a late host.refused.
    const knownLate = l.name === 'host.refused' && process.env.TROUPE_FUZZ_STRICT !== '1';
    if (ended !== undefined && l.name !== 'request.answered' && !knownLate) {
      out.push(
        `run ${runId} (gen ${l.gen}): ${l.name} (#${l.i}) delivered after its outcome ${ended.name} (#${ended.i})`,
      );
    }
    if (TERMINAL.has(l.name) && ended === undefined) end.set(key, l);
  }
  for (const l of log) {
    const closed = closedGens.get(l.gen);
    if (closed !== undefined && l.i >= closed) {
      out.push(`gen ${l.gen}: ${l.name} of ${l.e.agentId ?? '?'} (#${l.i}) emitted after close()/destroy() resolved`);
    }
  }
  // A cancelled run (or one under it) never ends done.
  for (const c of cancels) {
    for (const [key, start] of first) {
      if (!key.startsWith(`${c.gen}:`) || start >= c.at) continue;
      const e = end.get(key);
      const path = pathOf.get(key) ?? [];
      if (!path.includes(c.id)) continue;
      if (e !== undefined && e.i < c.at) continue; // had ended before the cancel
      if (e?.name.endsWith('.done')) {
        out.push(
          `run ${key} (${path.join(' > ')}) was cancelled (cancel(${c.id}) returned true at #${c.at}) but ended done (#${e.i})`,
        );
      }
    }
  }
  // Across restarts: a run that ended cancelled never ends done later (closeCancelled.test.ts: known, strict only).
  if (process.env.TROUPE_FUZZ_STRICT === '1') {
    const cancelledRuns = new Map<string, Logged>();
    for (const l of log) {
      const runId = l.e.runId;
      if (typeof runId !== 'string') continue;
      if (l.name.endsWith('.cancelled')) cancelledRuns.set(runId, l);
      const c = cancelledRuns.get(runId);
      if (c !== undefined && l.name.endsWith('.done') && c.gen < l.gen) {
        out.push(`run ${runId} ended ${c.name} (#${c.i}, gen ${c.gen}) and then ${l.name} (#${l.i}, gen ${l.gen})`);
      }
    }
  }
  // A run ends after every run of its subtree that started while it lived.
  for (const [key, e] of end) {
    const path = pathOf.get(key);
    const start = first.get(key) as number;
    if (path === undefined) continue;
    for (const [other, s] of first) {
      if (other === key || !other.startsWith(key.slice(0, key.indexOf(':') + 1))) continue;
      const p = pathOf.get(other);
      if (p === undefined || p.length <= path.length || !path.every((a, i) => p[i] === a)) continue;
      if (s <= start || s >= e.i) continue;
      const oe = end.get(other);
      if (oe === undefined || oe.i > e.i) {
        out.push(
          `run ${key} (${path.join(' > ')}) ended ${e.name} (#${e.i}) before its descendant ${p.join(' > ')} ${oe === undefined ? 'ended at all' : `ended (#${oe.i})`}`,
        );
      }
    }
  }
}

/**
 * fast-check's options for a fuzz file: `TROUPE_FUZZ_RUNS` sequences (default `runs`, which the file
 * takes from TROUPE_TEST_DEPTH: fewer in `pnpm test`, all of them in the deep tier), a fixed seed
 * by default (CI runs the same sequences each time; `TROUPE_FUZZ_SEED=random` explores, a number
 * replays), shrinking only with `TROUPE_FUZZ_SHRINK=1`.
 */
export function fuzzOptions(runs: number): { numRuns: number; seed?: number; endOnFailure: boolean } {
  const given = process.env.TROUPE_FUZZ_SEED;
  const seed = given === 'random' ? undefined : given === undefined ? 20261202 : Number(given);
  return {
    numRuns: Number(process.env.TROUPE_FUZZ_RUNS ?? runs),
    ...(seed === undefined ? {} : { seed }),
    endOnFailure: process.env.TROUPE_FUZZ_SHRINK !== '1',
  };
}

/** Play one scenario in a temp directory and fail on any violation, printing its trace (and with TROUPE_FUZZ_VERBOSE=1, every trace). */
export async function playChecked(scenario: Scenario): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'troupe-fuzz-'));
  try {
    const { violations, log } = await play(scenario, { dir });
    if (violations.length > 0 || process.env.TROUPE_FUZZ_VERBOSE === '1') {
      console.log(`VIOLATIONS:\n${violations.join('\n')}\n${log.join('\n')}\n${JSON.stringify(scenario)}`);
    }
    assert.deepEqual(violations, []);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * A question of `lead` (agent `agentId`, tenant `scope`) saved in a SQLite file by a supervisor
 * that then closed; `run` gets a second supervisor on the same file (after `prepare`) and the id.
 */
export async function withStoredQuestion(
  scope: object,
  agentId: string,
  run: (second: Supervisor, id: string) => Promise<void>,
  prepare: (second: Supervisor) => Promise<void> = async () => {},
): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'troupe-fuzz-'));
  const file = join(dir, 'stored.sqlite');
  const open = () =>
    createSupervisor({ agents: [lead], pool: { threads: 1 }, persistence: sqlitePersistence({ file }) });
  try {
    const first = open();
    const agent = await first.startAgent(lead, { scope, agentId });
    const reply = await agent.send(JSON.stringify({ n: 'p1', u: 1, items: [], own: 'ask' } satisfies LeadPlan));
    assert.equal(reply.status, 'suspended');
    const id = reply.status === 'suspended' ? reply.request.id : '';
    await first.close();
    const second = open();
    try {
      await prepare(second);
      await run(second, id);
    } finally {
      await second.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
