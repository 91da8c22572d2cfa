// A model-based property test of the run tree (contract 11), with real
// worker threads. fast-check generates a sequence of host actions: start a
// root (a parent agent's message, or a direct spawn) with a random plan —
// a tree of runs that answer, ask a person, run until cancelled, or delegate
// to children in parallel — then answer or decline an open request, move the
// injected clock past the requests' expiry, cancel any agent announced so far
// (live or not), and finally close (at once, or once the supervisor caught up),
// with or without the default store saving the runs. After every action the test waits until
// the supervisor reaches the state a plain model of the tree predicts (every
// run ended, suspended or blocked as the model says, synchronised on events),
// and checks:
// - the model: each run's outcome (a cancelled run never ends `done`, a
//   cancel reaches the whole subtree), each reply, and the results each
//   parent's model saw — a declined or expired answer reaches the run whose
//   tool asked, as an error result its model carries on with;
// - the log (checkRunTree): one terminal event per run and nothing of a run
//   after it; a run, and a terminal reply, end after their whole subtree;
//   totalUsage = usage + Σ children's totalUsage; usage = its model calls';
// - the supervisor's own figures: running, suspended and pending counts, and
//   each parent agent's status;
// - after close() resolves: nothing runs, no thread is left, and (checked
//   once every run is over) no event of that supervisor arrives afterwards.
//
// A failure prints its seed, path and counterexample. Reproduce it with
// TROUPE_PROPERTY_SEED=<seed> TROUPE_PROPERTY_PATH=<path>, or play the
// counterexample alone with TROUPE_PROPERTY_CASE='<counterexample JSON>'.
// TROUPE_PROPERTY_RUNS sets the number of runs (default 12, and 100 with
// TROUPE_TEST_DEPTH=deep: 100 measured 38 s on the two shared cores at load 5,
// 75 s at load 13 — most of it booting each scenario's four worker threads, at
// about 0.19 s of CPU each);
// TROUPE_PROPERTY_STRICT=1 also plays trees deeper than the pool (see STRICT).
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import type { CancelReason } from '@troupe/core';
import { ManualClock } from '@troupe/core/testing';
import { type AgentHandle, createSupervisor, type Supervisor } from '@troupe/supervisor';
import fc from 'fast-check';
import { MAX_DEPTH, type Plan, tree0 } from '../fixtures/agents/tree.js';
import { byDepth } from '../fixtures/testDepth.js';
import { checkRunTree, TERMINAL_EVENTS } from './checkRunTree.js';
import { EventLog, type Logged } from './EventLog.js';

const RUNS = Number(process.env.TROUPE_PROPERTY_RUNS ?? byDepth({ quick: 12, deep: 100 }));
const SEED = process.env.TROUPE_PROPERTY_SEED === undefined ? undefined : Number(process.env.TROUPE_PROPERTY_SEED);
const PATH = process.env.TROUPE_PROPERTY_PATH;
/**
 * Strict: also play what hits the bugs of runTree.failing.ts.txt (bugs 1-3:
 * otherwise skipped and counted as `avoided`; bug 6: otherwise plans are
 * pruned), and hold the supervisor to the contract there too (bug 4: nothing
 * of a closed supervisor's runs is left; bug 5: a suspended tree's total
 * usage counts its suspended runs).
 */
/**
 * Unpruned trees: deeper than the pool, so worker parents give their threads up while their
 * children wait for one (deferred task calls). The model does not predict those suspensions, so
 * its counts of running runs do not hold there; off by default.
 */
const STRICT = process.env.TROUPE_PROPERTY_STRICT === '1';
/** The bugs the skipped actions hit (runTreeRegressions.test.ts) are fixed: nothing is skipped. */
const FIXED = true;
/** A scenario (JSON, as a failure prints it) to play alone, without fast-check. */
const CASE = process.env.TROUPE_PROPERTY_CASE;
/** A step that does not reach the model's state within this long (real time) fails with a dump of the log. */
const STUCK_MS = 8_000;
const EXPIRY_MS = 1_000;
const CLOSE_TIMEOUT_MS = 5_000;
/**
 * Worker threads of each supervisor. A run waiting on its children (a
 * delegate) or on its cancel (a spinner) holds its thread; with as many such
 * runs as threads, their children wait for a thread for ever (bug 6 of
 * runTree.failing.ts.txt). Outside strict mode a root's plan is pruned so
 * that fewer runs than this can hold a thread at once.
 */
const THREADS = 4;

// ── Generated input ─────────────────────────────────────────────────────────

/** A plan before it gets labels and expiry times (added when its root starts). */
type Shape =
  | { readonly kind: 'answer'; readonly u: number }
  | { readonly kind: 'ask'; readonly u: number; readonly expiring: boolean }
  | { readonly kind: 'spin'; readonly u: number; readonly poll: boolean }
  | { readonly kind: 'delegate'; readonly u: number; readonly children: readonly Shape[] };

type Action =
  | { readonly t: 'start'; readonly via: 'message' | 'spawn'; readonly shape: Shape }
  | { readonly t: 'answer'; readonly pick: number; readonly ok: boolean }
  | { readonly t: 'advance' }
  | { readonly t: 'cancel'; readonly pick: number };

const tokens = fc.integer({ min: 1, max: 9 });

function shapeAt(depth: number): fc.Arbitrary<Shape> {
  const leaves: fc.Arbitrary<Shape>[] = [
    fc.record({ kind: fc.constant('answer' as const), u: tokens }),
    fc.record({ kind: fc.constant('ask' as const), u: tokens, expiring: fc.boolean() }),
    fc.record({ kind: fc.constant('spin' as const), u: tokens, poll: fc.boolean() }),
  ];
  if (depth >= MAX_DEPTH) return fc.oneof(...leaves);
  const delegate = fc.record({
    kind: fc.constant('delegate' as const),
    u: tokens,
    children: fc.array(shapeAt(depth + 1), { minLength: 1, maxLength: depth === 0 ? 3 : 2 }),
  });
  return fc.oneof(
    { arbitrary: leaves[0] as fc.Arbitrary<Shape>, weight: 1 },
    { arbitrary: leaves[1] as fc.Arbitrary<Shape>, weight: 2 },
    { arbitrary: leaves[2] as fc.Arbitrary<Shape>, weight: 1 },
    { arbitrary: delegate, weight: depth === 0 ? 5 : 2 },
  );
}

const start: fc.Arbitrary<Action> = fc.record({
  t: fc.constant('start' as const),
  via: fc.constantFrom('message' as const, 'spawn' as const),
  shape: shapeAt(0),
});

const action: fc.Arbitrary<Action> = fc.oneof(
  { arbitrary: start, weight: 1 },
  { arbitrary: fc.record({ t: fc.constant('answer' as const), pick: fc.nat(20), ok: fc.boolean() }), weight: 4 },
  { arbitrary: fc.record({ t: fc.constant('advance' as const) }), weight: 2 },
  { arbitrary: fc.record({ t: fc.constant('cancel' as const), pick: fc.nat(40) }), weight: 2 },
);

/**
 * The actions; whether to close right after the last one (when the model says
 * nothing runs then) instead of once the supervisor caught up; whether the
 * supervisor saves its runs (its default in-memory store) or not (`persistence: null`).
 */
const scenario: fc.Arbitrary<[Action[], boolean, boolean]> = fc
  .tuple(start, fc.array(action, { maxLength: 7 }), fc.boolean(), fc.boolean())
  .map(([first, rest, early, persist]) => [[first, ...rest], early, persist]);

// ── The model ───────────────────────────────────────────────────────────────

type Fate =
  | { readonly status: 'done'; readonly text: string }
  | { readonly status: 'cancelled'; readonly reason: CancelReason };
type Phase = 'ended' | 'suspended' | 'running';

class MNode {
  readonly plan: Plan;
  readonly parent: MNode | undefined;
  readonly root: MRoot;
  readonly index: number;
  readonly children: MNode[];
  cancelled: CancelReason | undefined;
  answer: { readonly ok: boolean; readonly expired: boolean; readonly data: string } | undefined;
  fate: Fate | undefined;

  constructor(plan: Plan, parent: MNode | undefined, root: MRoot, index: number) {
    this.plan = plan;
    this.parent = parent;
    this.root = root;
    this.index = index;
    this.children = plan.kind === 'delegate' ? plan.children.map((c, i) => new MNode(c, this, root, i)) : [];
  }

  get agentId(): string {
    return this.parent === undefined ? this.root.agentId : `${this.parent.agentId}-sub-${this.index + 1}`;
  }

  get path(): string[] {
    return this.parent === undefined ? [this.agentId] : [...this.parent.path, this.agentId];
  }

  /** Where the model says this run is once the supervisor has caught up with the last action. */
  get phase(): Phase {
    if (this.fate !== undefined || this.cancelled !== undefined) return 'ended';
    const kind = this.plan.kind;
    if (kind === 'answer') return 'ended';
    if (kind === 'ask') return this.answer === undefined ? 'suspended' : 'ended';
    if (kind === 'spin') return 'running';
    const phases = this.children.map((c) => c.phase);
    if (phases.every((p) => p === 'ended')) return 'ended';
    return phases.includes('running') ? 'running' : 'suspended';
  }

  *walk(): Generator<MNode> {
    yield this;
    for (const child of this.children) yield* child.walk();
  }

  /** What its parent's `task` call returns for it, as its model reports it. */
  result(): unknown {
    const fate = this.fate as Fate;
    return fate.status === 'done' ? fate.text : { error: 'ERR_CANCELLED' };
  }

  /** Record the outcomes of the runs the model says have ended (children first). */
  settle(): void {
    for (const child of this.children) child.settle();
    if (this.fate !== undefined || this.phase !== 'ended') return;
    if (this.cancelled !== undefined) {
      this.fate = { status: 'cancelled', reason: this.cancelled };
      return;
    }
    const plan = this.plan;
    let results: unknown[] | undefined;
    if (plan.kind === 'ask') {
      const a = this.answer as NonNullable<MNode['answer']>;
      results = [
        a.expired ? { error: 'ERR_REQUEST_EXPIRED' } : a.ok ? { answered: a.data } : { error: 'ERR_REQUEST_DECLINED' },
      ];
    } else if (plan.kind === 'delegate') results = this.children.map((c) => c.result());
    this.fate = {
      status: 'done',
      text: JSON.stringify(results === undefined ? { label: plan.label } : { label: plan.label, results }),
    };
  }

  /** Cancel it and what of its subtree still lives (`parent` below it, as the cancellation table pushes it down). */
  cancel(reason: CancelReason): void {
    for (const n of this.walk()) if (n.phase !== 'ended') n.cancelled = n === this ? reason : 'parent';
  }
}

interface Reply {
  readonly what: string;
  settled: { readonly status: string; readonly text?: string; readonly reason?: string } | undefined;
}

class MRoot {
  readonly via: 'message' | 'spawn';
  agentId = '';
  node: MNode | undefined;
  handle: AgentHandle | undefined;
  readonly replies: Reply[] = [];
  constructor(via: 'message' | 'spawn') {
    this.via = via;
  }
}

function label(shape: Shape, name: string, expiresAt: number): Plan {
  switch (shape.kind) {
    case 'answer':
      return { kind: 'answer', label: name, u: shape.u };
    case 'ask':
      return shape.expiring
        ? { kind: 'ask', label: name, u: shape.u, expiresAt }
        : { kind: 'ask', label: name, u: shape.u };
    case 'spin':
      return { kind: 'spin', label: name, u: shape.u, poll: shape.poll };
    case 'delegate':
      return {
        kind: 'delegate',
        label: name,
        u: shape.u,
        children: shape.children.map((c, i) => label(c, `${name}.${i}`, expiresAt)),
      };
  }
}

/**
 * `shape` with its worker runs that can hold a thread indefinitely (delegates,
 * spinners) beyond `budget` replaced by answers, in pre-order. A parent
 * agent's own run is on the supervisor's thread and holds none.
 */
function prune(shape: Shape, onWorker: boolean, budget: { left: number }): Shape {
  if (shape.kind === 'answer' || shape.kind === 'ask') return shape;
  if (onWorker) {
    if (budget.left === 0) return { kind: 'answer', u: shape.u };
    budget.left--;
  }
  if (shape.kind === 'spin') return shape;
  return { ...shape, children: shape.children.map((c) => prune(c, true, budget)) };
}

// ── One scenario against a real supervisor ──────────────────────────────────

/** What the scenarios did (reported as a diagnostic of the test). */
const tally = {
  scenarios: 0,
  roots: 0,
  runs: 0,
  answered: 0,
  declined: 0,
  expired: 0,
  cancels: 0,
  cancelsOfEnded: 0,
  answersWhileParentRuns: 0,
  closesWithRunning: 0,
  keptAtClose: 0,
  deepest: 0,
  avoided: 0,
  closedEarly: 0,
  persisted: 0,
};

/** Logs of closed supervisors, with their length when close() resolved (checked once every run is over). */
const closedLogs: { readonly log: EventLog; readonly length: number; readonly scenario: string }[] = [];

class Scenario {
  readonly clock = new ManualClock();
  readonly supervisor: Supervisor;
  readonly log: EventLog;
  readonly roots: MRoot[] = [];
  readonly #changed: (() => void)[] = [];
  #scheduled = false;
  #answers = 0;

  constructor(persist: boolean) {
    this.supervisor = createSupervisor({
      clock: this.clock,
      ...(persist ? {} : { persistence: null }),
      pool: { threads: THREADS, graceMs: 1_000 },
    });
    this.log = new EventLog(this.supervisor);
    this.log.listen(() => this.#poke());
  }

  // Re-check the waiting condition once the cascade an event belongs to has run.
  #poke(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      for (const check of this.#changed.splice(0)) check();
    });
  }

  // Run `check` after the next logged entry (every change of the tree logs one: an event or a reply).
  #watch(check: () => void): void {
    this.#changed.push(check);
  }

  get nodes(): MNode[] {
    return this.roots.flatMap((r) => (r.node === undefined ? [] : [...r.node.walk()]));
  }

  #track(root: MRoot, what: string, promise: Promise<unknown>): void {
    const reply: Reply = { what, settled: undefined };
    root.replies.push(reply);
    promise.then(
      (value) => {
        const v = value as { status: string; text?: string; result?: string; reason?: string };
        reply.settled = {
          status: v.status,
          ...(v.text !== undefined ? { text: v.text } : v.result !== undefined ? { text: v.result } : {}),
          ...(v.reason !== undefined ? { reason: v.reason } : {}),
        };
        this.log.note('reply', {
          agentId: root.agentId,
          what,
          status: v.status,
          totalUsage: (v as { totalUsage?: unknown }).totalUsage,
        });
      },
      (error: unknown) => {
        reply.settled = { status: `rejected: ${(error as Error)?.message}` };
        this.log.note('reply', { agentId: root.agentId, what, status: 'rejected' });
      },
    );
  }

  /** A new action begins (see `quietSoon`). */
  next(): void {}

  /** Whether the model says nothing will run once the last action has taken effect. */
  quietSoon(): boolean {
    for (const root of this.roots) root.node?.settle();
    if (this.nodes.some((n) => n.phase === 'running')) return false;
    return true;
  }

  /** Worker runs that hold their thread until something else happens: spinners, delegates waiting on running children. */
  #holding(): number {
    return this.nodes.filter(
      (n) =>
        (n.parent !== undefined || n.root.via === 'spawn') &&
        n.phase === 'running' &&
        (n.plan.kind === 'spin' || n.plan.kind === 'delegate'),
    ).length;
  }

  async start(via: 'message' | 'spawn', generated: Shape): Promise<void> {
    const root = new MRoot(via);
    const shape = STRICT
      ? generated
      : prune(generated, via === 'spawn', { left: Math.max(0, THREADS - 1 - this.#holding()) });
    const plan = label(shape, `r${this.roots.length}`, this.clock.now() + EXPIRY_MS);
    this.roots.push(root);
    const input = JSON.stringify(plan);
    if (via === 'message') {
      const handle = await this.supervisor.startAgent(tree0, { scope: {} });
      root.handle = handle;
      root.agentId = handle.id;
      root.node = new MNode(plan, undefined, root, 0);
      this.#track(root, 'send', handle.send(input));
    } else {
      const spawned = this.log.entries.length;
      const outcome = this.supervisor.spawn(tree0, { input, scope: {} });
      const announced = await this.log.when(
        (e) => e.seq >= spawned && e.name === 'subagent.spawned' && e.payload.parentAgentId === undefined,
      );
      root.agentId = String(announced.payload.agentId);
      root.node = new MNode(plan, undefined, root, 0);
      this.#track(root, 'spawn', outcome);
    }
  }

  /** Open requests, as the model knows them, in label order. */
  #asking(): MNode[] {
    return this.nodes
      .filter((n) => n.plan.kind === 'ask' && n.phase === 'suspended')
      .sort((a, b) => (a.plan.label < b.plan.label ? -1 : 1));
  }

  #requestOf(node: MNode): Logged | undefined {
    return this.log.entries.findLast(
      (e) => e.name === 'request.opened' && (e.payload.path as string[]).at(-1) === node.agentId,
    );
  }

  async answer(pick: number, ok: boolean): Promise<void> {
    const asking = this.#asking();
    const node = asking[pick % Math.max(1, asking.length)];
    if (node === undefined) return;
    const opened = this.#requestOf(node);
    assert.ok(opened !== undefined, `no request.opened for ${node.plan.label}`);
    const request = opened.payload.request as { id: string; expiresAt?: number };
    const expired = request.expiresAt !== undefined && this.clock.now() > request.expiresAt;
    const data = `answer-${this.#answers++}`;
    if (expired) tally.expired++;
    else if (ok) tally.answered++;
    else tally.declined++;
    if (node.parent?.phase === 'running') tally.answersWhileParentRuns++;
    if (
      this.#hitsKnownBug(
        () => {
          node.answer = { ok, expired, data };
        },
        () => {
          node.answer = undefined;
        },
        false,
      )
    ) {
      return;
    }
    node.answer = { ok, expired, data };
    this.#track(node.root, `answer ${node.plan.label}`, this.supervisor.answer(request.id, { ok, data }));
  }

  advance(): void {
    this.clock.advance(EXPIRY_MS + 1);
  }

  /** Ids announced so far (parent agents and every spawned run), in label order. */
  #announced(): MNode[] {
    const seen = new Set<string>();
    for (const e of this.log.named('subagent.spawned')) seen.add(String(e.payload.agentId));
    return this.nodes
      .filter((n) => seen.has(n.agentId) || (n.parent === undefined && n.root.via === 'message'))
      .sort((a, b) => (a.plan.label < b.plan.label ? -1 : 1));
  }

  cancel(pick: number): void {
    const announced = this.#announced();
    const node = announced[pick % Math.max(1, announced.length)];
    if (node === undefined) return;
    const live = node.phase !== 'ended';
    if (live) {
      const before = this.nodes.map((n) => [n, n.cancelled] as const);
      const revert = () => {
        for (const [n, cancelled] of before) n.cancelled = cancelled;
      };
      if (this.#hitsKnownBug(() => node.cancel('user'), revert, true)) return;
      node.cancel('user');
    }
    if (live) tally.cancels++;
    else tally.cancelsOfEnded++;
    const changed = this.supervisor.cancel(node.agentId);
    assert.equal(changed, live, `cancel(${node.plan.label}) returned ${changed}; the model says ${node.phase}`);
  }

  /**
   * Whether an action (`apply`, undone by `revert`) would hit bug 1 or 2 of
   * runTree.failing.ts.txt; outside strict mode such an action is skipped.
   * 1. A suspended run ends while its parent still runs (waiting on a sibling):
   *    its result is lost, and the parent later suspends on it for ever.
   * 2. A cancel resumes part of a suspended parent agent's tree that then
   *    waits again: the agent says `running` for ever, and close() waits its timeout.
   */
  #hitsKnownBug(apply: () => void, revert: () => void, byCancel: boolean): boolean {
    if (FIXED) return false;
    const before = new Map(this.nodes.map((n) => [n, n.phase]));
    apply();
    const after = new Map(this.nodes.map((n) => [n, n.phase]));
    const cancelled = new Set(this.nodes.filter((n) => n.cancelled !== undefined));
    revert();
    let hit = false;
    for (const [n, was] of before) {
      if (was !== 'suspended' || after.get(n) !== 'ended') continue;
      const parent = n.parent;
      if (parent !== undefined && before.get(parent) === 'running' && after.get(parent) !== 'ended') hit = true;
      const root = n.root.node as MNode;
      if (byCancel && !cancelled.has(n) && n.plan.kind === 'delegate' && n.root.via === 'message') {
        if (after.get(root) === 'suspended') hit = true;
      }
    }
    if (hit) tally.avoided++;
    return hit;
  }

  // Settle the model, then wait until the supervisor shows the state it predicts.
  async caughtUp(step: string): Promise<void> {
    for (const root of this.roots) root.node?.settle();
    let why = this.#behind();
    if (why !== undefined) {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          reject(
            new Error(`${step}: the supervisor did not reach the model's state: ${this.#behind()}\n${this.describe()}`),
          );
        }, STUCK_MS);
        const check = () => {
          why = this.#behind();
          if (why === undefined) {
            clearTimeout(timer);
            resolve();
          } else this.#watch(check);
        };
        this.#watch(check);
        this.#poke();
      });
    }
  }

  #terminal(agentId: string): Logged | undefined {
    return this.log.entries.find((e) => TERMINAL_EVENTS.has(e.name) && e.payload.agentId === agentId);
  }

  /** Why the supervisor is not (yet) where the model says it is; undefined when it is. */
  #behind(): string | undefined {
    const spawned = new Set(this.log.named('subagent.spawned').map((e) => String(e.payload.agentId)));
    let running = 0;
    let suspendedBelow = 0;
    let open = 0;
    for (const n of this.nodes) {
      const phase = n.phase;
      if (phase === 'ended') {
        if (this.#terminal(n.agentId) === undefined) return `${n.plan.label} (${n.agentId}) has not ended`;
        continue;
      }
      if (n.parent !== undefined || n.root.via === 'spawn') {
        if (!spawned.has(n.agentId)) return `${n.plan.label} (${n.agentId}) was not spawned`;
      }
      if (phase === 'running') running++;
      else if (n.parent !== undefined) suspendedBelow++;
      if (n.plan.kind === 'ask') {
        open++;
        if (this.#requestOf(n) === undefined) return `${n.plan.label} has not asked`;
      }
      if (n.plan.kind === 'spin') {
        const spinning = this.log.entries.some(
          (e) => e.name === 'tool.execute.start' && e.payload.toolName === 'spin' && e.payload.agentId === n.agentId,
        );
        if (!spinning) return `${n.plan.label} is not spinning yet`;
      }
    }
    for (const root of this.roots) {
      const node = root.node;
      if (node === undefined) continue;
      if (node.phase !== 'running') {
        for (const reply of root.replies) {
          if (reply.settled === undefined) return `the ${reply.what} reply of ${node.plan.label} has not come`;
        }
      }
    }
    const stats = this.supervisor.stats();
    if (stats.pool.running !== running) return `${stats.pool.running} runs running, the model says ${running}`;
    if (stats.suspendedSubagents !== suspendedBelow) {
      return `${stats.suspendedSubagents} subagents suspended, the model says ${suspendedBelow}`;
    }
    if (stats.pendingRequests !== open) return `${stats.pendingRequests} requests pending, the model says ${open}`;
    return undefined;
  }

  /** What the model and the supervisor hold now (for failure messages). */
  describe(): string {
    const lines = this.nodes.map(
      (n) =>
        `  ${n.plan.label} ${n.plan.kind} ${n.agentId}: ${n.phase}${n.fate === undefined ? '' : ` ${JSON.stringify(n.fate)}`}`,
    );
    const agents = this.roots
      .filter((r) => r.handle !== undefined)
      .map((r) => `${r.node?.plan.label}: ${r.handle?.status}`)
      .join(', ');
    return `model:\n${lines.join('\n')}\nparent agents: ${agents}\nstats: ${JSON.stringify(this.supervisor.stats())}\nlog:\n${this.log.dump()}`;
  }

  /** Everything the model predicts at a state it has caught up with. */
  check(step: string, closed = false): void {
    const fail = (message: string) => assert.fail(`${step}: ${message}\n${this.describe()}`);
    for (const n of this.nodes) {
      const fate = n.fate;
      if (fate === undefined) continue;
      const end = this.#terminal(n.agentId);
      if (end === undefined) fail(`${n.plan.label} has no outcome`);
      const status = String(end?.name.split('.')[1]);
      if (status !== fate.status) fail(`${n.plan.label} ended ${status}, the model says ${fate.status}`);
      if (fate.status === 'cancelled' && end?.payload.reason !== fate.reason) {
        fail(`${n.plan.label} was cancelled for ${String(end?.payload.reason)}, the model says ${fate.reason}`);
      }
      if (fate.status === 'done' && end?.payload.turns !== undefined) {
        const turns = Number(end.payload.turns);
        const usage = end.payload.usage as { inputTokens: number; outputTokens: number };
        if (usage.inputTokens !== n.plan.u * turns || usage.outputTokens !== turns) {
          fail(`${n.plan.label}: ${turns} turns of ${n.plan.u} tokens, usage ${JSON.stringify(usage)}`);
        }
      }
    }
    for (const root of this.roots) {
      const node = root.node;
      if (node === undefined) continue;
      if (root.handle !== undefined && !closed) {
        const expected = { ended: 'idle', suspended: 'suspended', running: 'running' }[node.phase];
        if (root.handle.status !== expected) {
          fail(`parent agent ${node.plan.label} is ${root.handle.status}, the model says ${expected} (${node.phase})`);
        }
      }
      for (const reply of root.replies) {
        const settled = reply.settled;
        if (settled === undefined) continue;
        const fate = node.fate;
        if (fate === undefined) {
          if (settled.status !== 'suspended' && node.phase === 'suspended') {
            fail(`the ${reply.what} reply of ${node.plan.label} is ${settled.status}; the model says suspended`);
          }
          continue;
        }
        if (settled.status === 'suspended') continue; // an earlier quiet moment
        if (settled.status !== fate.status)
          fail(`the ${reply.what} reply of ${node.plan.label} is ${settled.status}, the model says ${fate.status}`);
        if (fate.status === 'done' && settled.text !== fate.text) {
          fail(`the ${reply.what} reply of ${node.plan.label} is ${settled.text}\n  the model says ${fate.text}`);
        }
      }
    }
    if (!closed) {
      // Every open question is listed once, with the path of the run whose tool asked.
      const listed = this.supervisor
        .pendingRequests()
        .map((r) => `${r.agentId}: ${r.path.join(' > ')}`)
        .sort();
      const asking = this.nodes
        .filter((n) => n.plan.kind === 'ask' && n.phase === 'suspended')
        .map((n) => `${n.root.agentId}: ${n.path.join(' > ')}`)
        .sort();
      if (JSON.stringify(listed) !== JSON.stringify(asking)) {
        fail(`pendingRequests() lists ${JSON.stringify(listed)}; the model says ${JSON.stringify(asking)}`);
      }
    }
    const problems = checkRunTree(this.log.entries);
    problems.push(...suspendedTotals(this.log.entries));
    if (problems.length > 0) fail(problems.join('\n'));
  }

  async close(): Promise<void> {
    const running = this.nodes.some((n) => n.phase === 'running');
    if (running) tally.closesWithRunning++;
    tally.keptAtClose += this.nodes.filter((n) => n.phase === 'suspended').length;
    tally.roots += this.roots.length;
    tally.runs += this.nodes.length;
    for (const n of this.nodes) tally.deepest = Math.max(tally.deepest, n.path.length);
    // At the close timeout, every root with something running is cancelled (shutdown), suspended parts included.
    for (const root of this.roots) {
      const node = root.node;
      if (node !== undefined && [...node.walk()].some((n) => n.phase === 'running')) node.cancel('shutdown');
    }
    const closing = this.supervisor.close({ timeoutMs: CLOSE_TIMEOUT_MS });
    // Nothing runs: close() drains at once. Something runs: move the clock to its timeout.
    if (running) this.clock.advance(CLOSE_TIMEOUT_MS);
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      closing,
      new Promise((_resolve, reject) => {
        timer = setTimeout(
          () => reject(new Error(`close() did not resolve (running: ${running})\n${this.describe()}`)),
          STUCK_MS,
        );
      }),
    ]).finally(() => clearTimeout(timer));
    this.log.note('closed', {});
    for (const root of this.roots) root.node?.settle();
    const stats = this.supervisor.stats();
    assert.equal(stats.pool.running, 0, 'nothing runs after close()');
    assert.equal(stats.pool.threads, 0, 'no thread is left after close()');
    this.check('close', true);
    // Suspended trees are kept (a parent agent's for a new supervisor); every other run has ended.
    const kept = new Set(this.nodes.filter((n) => n.phase === 'suspended').map((n) => n.agentId));
    const problems = checkRunTree(this.log.entries, { final: true, unfinished: (run) => kept.has(run.agentId) });
    {
      // A closed supervisor keeps nothing of its runs: a parent agent's suspended conversation is
      // saved (and forgotten here); a suspended direct spawn can never be answered again.
      if (stats.runs !== 0) problems.push(`${stats.runs} runs are left in the closed supervisor`);
      const listed = this.supervisor.pendingRequests().length;
      if (listed !== 0) problems.push(`pendingRequests() lists ${listed} requests nobody can answer any more`);
    }
    if (problems.length > 0) assert.fail(`after close: ${problems.join('\n')}\n${this.describe()}`);
  }
}

/**
 * Strict mode: a suspended subtree's total (subagent.suspended, a suspended
 * reply) is what every model call of that subtree has used so far.
 */
function suspendedTotals(entries: readonly Logged[]): string[] {
  const problems: string[] = [];
  const stops = entries.filter((e) => e.name === 'model.stop');
  const usedBelow = (path: readonly string[], before: number) => {
    let input = 0;
    let output = 0;
    for (const e of stops) {
      const p = e.payload.path as string[];
      if (e.seq > before || !path.every((id, i) => p[i] === id)) continue;
      input += Number(e.payload.usage?.inputTokens ?? 0);
      output += Number(e.payload.usage?.outputTokens ?? 0);
    }
    return { inputTokens: input, outputTokens: output };
  };
  for (const e of entries) {
    const suspendedEvent = e.name === 'subagent.suspended';
    if (!suspendedEvent && !(e.name === 'reply' && e.payload.status === 'suspended')) continue;
    const path = suspendedEvent ? (e.payload.path as string[]) : [String(e.payload.agentId)];
    const used = usedBelow(path, e.seq);
    const total = e.payload.totalUsage as { inputTokens: number; outputTokens: number } | undefined;
    if (total?.inputTokens !== used.inputTokens || total?.outputTokens !== used.outputTokens) {
      problems.push(
        `${e.name} of ${path.at(-1)} (#${e.seq}) says totalUsage ${JSON.stringify(total)}; its subtree's model calls used ${JSON.stringify(used)}`,
      );
    }
  }
  return problems;
}

async function play(actions: readonly Action[], closeEarly: boolean, persist: boolean): Promise<void> {
  tally.scenarios++;
  if (persist) tally.persisted++;
  const s = new Scenario(persist);
  const script = JSON.stringify([actions, closeEarly, persist]);
  try {
    await s.supervisor.ready();
    for (const [i, a] of actions.entries()) {
      const step = `step ${i} ${JSON.stringify(a)}`;
      s.next();
      switch (a.t) {
        case 'start':
          await s.start(a.via, a.shape);
          break;
        case 'answer':
          await s.answer(a.pick, a.ok);
          break;
        case 'advance':
          s.advance();
          break;
        case 'cancel':
          s.cancel(a.pick);
          break;
      }
      if (closeEarly && i === actions.length - 1 && s.quietSoon()) {
        // close() while the last action's effects are still on their way: it lets them finish.
        tally.closedEarly++;
        break;
      }
      await s.caughtUp(step);
      s.check(step);
    }
    await s.close();
    closedLogs.push({ log: s.log, length: s.log.entries.length, scenario: script });
  } catch (error) {
    await s.supervisor.destroy();
    throw error;
  }
}

describe('the run tree, model-based (random trees, random host actions, real workers)', () => {
  after(() => {
    for (const { log, length, scenario } of closedLogs) {
      assert.equal(
        log.entries.length,
        length,
        `events arrived after close() resolved:\n${log.dump(length)}\nscenario: ${scenario}`,
      );
    }
  });

  it('keeps its invariants after every step: outcomes, ordering, usage, routing of answers, close', async (t) => {
    t.after(() => t.diagnostic(`scenarios played: ${JSON.stringify(tally)}`));
    if (CASE !== undefined) {
      const [[actions, closeEarly, persist]] = JSON.parse(CASE) as [[Action[], boolean, boolean]];
      await play(actions, closeEarly, persist);
      return;
    }
    await fc.assert(
      fc.asyncProperty(scenario, ([actions, closeEarly, persist]) => play(actions, closeEarly, persist)),
      {
        numRuns: RUNS,
        ...(SEED === undefined ? {} : { seed: SEED }),
        ...(PATH === undefined ? {} : { path: PATH }),
        includeErrorInReport: true,
      },
    );
  });
});
