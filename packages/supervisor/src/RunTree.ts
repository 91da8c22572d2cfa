import {
  type Agent,
  type AgentId,
  type ApprovalHandler,
  addUsage,
  BackpressureError,
  type CancelReason,
  type Clock,
  createId,
  InvalidArgumentError,
  isUsage,
  type LoopState,
  type Metadata,
  NO_USAGE,
  type Request,
  type RunId,
  type Scope,
  type TaskResult,
  ToolTimeoutError,
  TroupeError,
  type Usage,
  WorkerCrashedError,
} from '@troupe/core';
import {
  DEFERRED_TASK_KIND,
  HostFeature,
  openCalls,
  type ResumeAnswer,
  renameRequests,
  resolveDelegatedCall,
  subagentId,
  type TurnCheckpoints,
} from '@troupe/core/internal';
import type { EventEmitter } from 'eventemitter3';
import { definitionOf, subagentNamed } from './internal/AgentDefinitions.js';
import { mintCapability } from './internal/capability.js';
import { Deadlines } from './internal/Deadlines.js';
import { LocalRunner } from './internal/LocalRunner.js';
import { RequestBook } from './internal/Requests.js';
import { RunAttempt, type RunHostView } from './internal/RunAttempt.js';
import { type DeltaListener, RunEvents } from './internal/RunEvents.js';
import {
  type ApprovedCall,
  type FinalEnd,
  hostRequest,
  type RequestEntry,
  type RootOwner,
  type RunKind,
  RunNode,
  type SavedConversation,
  taskResultOf,
  totalOf,
} from './internal/RunNode.js';
import { reviewOpenCalls } from './internal/reviewOpenCalls.js';
import type { Durability } from './persistence/Durability.js';
import type { AttemptEnd, AttemptWork, RunEnd, RunTransport } from './RunTransport.js';
import type { SupervisorEvents } from './SupervisorEvents.js';

export type { OpenRequest } from './internal/Requests.js';

/** Options of {@link RunTree}; validated by the supervisor. */
export interface RunTreeOptions {
  /**
   * Before a saved request's answer is taken from the store, the root whose tree asked it, while
   * nothing of that tree runs here: rejects (the answer is refused, the request stays open) when
   * another live process runs that conversation's message.
   */
  readonly beforeAnswer?: ((root: RunNode, requestId: string) => Promise<void>) | undefined;
  readonly clock: Clock;
  readonly events: EventEmitter<SupervisorEvents>;
  readonly approval: ApprovalHandler | undefined;
  /** What runs subagents' attempts (started by the tree). */
  readonly transport: RunTransport;
  /** Default relative deadline of every subagent run and direct spawn. */
  readonly subagentTimeoutMs: number | undefined;
  /** How often deadlines are looked at while a run with one is live (ms). */
  readonly deadlineIntervalMs: number;
  /** Initial capacity of this thread's cancellation slots (parent agents' runs). */
  readonly localCapacity?: number | undefined;
  /** Changes whenever a listener is added or removed (lets the tree cache "anyone listening?"). */
  readonly listenersVersion?: (() => number) | undefined;
  /** What is saved of runs, and where (none: nothing is saved). */
  readonly durability?: Durability | undefined;
}

/** What starts a root run: a parent agent's message, or a direct spawn. */
export interface RootSpec {
  readonly kind: 'message' | 'spawn';
  readonly agent: Agent;
  readonly agentId: AgentId;
  readonly scope: Scope;
  readonly toolContext: Readonly<Record<string, unknown>>;
  readonly owner: RootOwner;
  /** A message run's starting state (the conversation); a spawn starts fresh. */
  readonly state?: LoopState | undefined;
  readonly input: string;
  /** A spawn's metadata snapshot. */
  readonly metadata?: Metadata | undefined;
  readonly timeoutMs?: number | undefined;
  /** Children already numbered in this conversation (ids are never reused). */
  readonly nextChild?: number | undefined;
  /** Told the deltas of the root's whole tree (subscribed before anything runs). */
  readonly onDeltas?: DeltaListener | undefined;
  /** The conversation its rows are saved with (a message of a parent agent; none: not saved). */
  readonly conversation?: SavedConversation | undefined;
  /** Awaited before the run starts (the message's input is saved first); a rejection fails the run. */
  readonly beforeRun?: ((root: RunNode) => Promise<void>) | undefined;
  /** Resuming a message a crash interrupted: the open calls of its state that had started (and what their cut-off subagents had spent). */
  readonly interrupted?:
    | { readonly started: ReadonlySet<string>; readonly lost?: ReadonlyMap<string, Usage> | undefined }
    | undefined;
  /** What its children had spent already (a resumed message's, before the crash). */
  readonly childUsage?: Usage | undefined;
  /** The run's id when it continues a saved one (default: a new id). */
  readonly runId?: RunId | undefined;
  /** The attempt it was saved with, when it continues a saved run (its next start is one more). */
  readonly attempt?: number | undefined;
}

/** A question saved open, to open again under its id (see {@link RunTree.restoreRoot}). */
export interface RestoredRequest {
  readonly id: string;
  readonly toolCallId: string;
  readonly local: Request;
  readonly approval: boolean;
  /** For an approval: the call it is about, as saved (none: a yes does not pre-approve). */
  readonly call?: ApprovedCall | undefined;
  /** The run whose tool asked (default: the root). */
  readonly runId?: string | undefined;
}

/** A suspended run below a restored root, as saved. */
export interface RestoredRun {
  readonly runId: string;
  readonly parentRunId: string;
  readonly agentId: string;
  readonly toolCallId: string;
  readonly agent: Agent;
  readonly state: LoopState;
  readonly usage: Usage;
  readonly attempt: number;
}

/** A nested task a run asked for (a `task` tool call). */
export interface TaskRequest {
  readonly subagent: Agent | string;
  readonly instructions: string;
  readonly toolCallId: string;
  readonly metadata: Metadata;
}

const NO_EVENTS: readonly never[] = Object.freeze([]);
/** How many lost attempts of one run are run again (from their checkpoint) before it ends crashed. */
const MAX_LOST_ATTEMPTS = 3;
const NO_WAITERS: readonly ((reply: unknown) => void)[] = Object.freeze([]);
const NO_ANSWERS: readonly ResumeAnswer[] = Object.freeze([]);
const NO_APPROVED: readonly string[] = Object.freeze([]);

/**
 * The one owner of every run: each parent message, subagent run and direct
 * spawn is a node with its parent, children, phase, suspension, deadline,
 * cancel and usage — its own and its subtree's. Only the tree writes a
 * node's record. Cancellation, deadlines, draining, shutdown and usage walk
 * it; delegation is "a task request spawns a child node"; whatever runs a
 * subagent's attempt is reached through one {@link RunTransport}, and a
 * parent agent's loop runs on this thread ({@link LocalRunner}). Its rooms:
 * the questions and approvals ({@link RequestBook}), the events
 * ({@link RunEvents}), the deadlines ({@link Deadlines}).
 *
 * Invariants it keeps:
 * - a node ends (phase `ended`) exactly once, and only after its whole
 *   subtree has: no reply precedes the end of its subtree;
 * - a cancelled node never ends `done`, and a cancel reaches its whole
 *   subtree (a child born during a cancel starts cancelled);
 * - every event of a run is delivered before its outcome event;
 * - a root's waiters (a `send`, an `answer`, a `spawn`) are answered only
 *   when nothing of its tree runs (quiet): ended, or suspended throughout;
 * - an answer goes to the run whose own tool asked (the deepest); its
 *   outcome flows up into its suspended ancestors' states, each resumed
 *   only once it has nothing left open.
 */
export class RunTree {
  readonly #o: RunTreeOptions;
  readonly #clock: Clock;
  readonly #transport: RunTransport;
  readonly #local: LocalRunner;
  readonly #events: RunEvents;
  readonly #requests: RequestBook;
  readonly #deadlines: Deadlines;
  readonly #nodes = new Map<RunId, RunNode>();
  readonly #byAgent = new Map<string, RunNode>();
  readonly #roots = new Set<RunNode>();
  readonly #idle: (() => void)[] = [];
  /** The host operations each node's worker is served (made on its first dispatch). */
  /** What those operations reach of the tree. */
  readonly #hostView: RunHostView;
  /** Worker runs waiting on a task call of theirs (each holds its slot meanwhile). */
  readonly #blocked = new Set<RunNode>();
  /** Suspended runs an answer reached, resumed at the next turn of the event loop (see #deliverSoon). */
  readonly #delivering = new Set<RunNode>();
  /** A shutdown cancelled what ran (close()'s deadline, destroy()): no answer resumes a run after it. */
  #shutDown = false;
  /** From now on, runs a shutdown cancels are left as saved (destroy()). */
  #leaveSaved = false;
  /** Nodes queued or running anywhere (a process keep-alive is held while > 0). */
  #running = 0;
  #keepAlive: ReturnType<typeof setInterval> | undefined;

  constructor(options: RunTreeOptions) {
    this.#o = options;
    this.#clock = options.clock;
    this.#transport = options.transport;
    this.#events = new RunEvents(options.events, options.clock, options.listenersVersion);
    this.#local = new LocalRunner(options.clock, options.localCapacity);
    this.#deadlines = new Deadlines(options.clock, options.deadlineIntervalMs, (node) => this.cancel(node, 'deadline'));
    this.#requests = new RequestBook({
      clock: options.clock,
      events: this.#events,
      approval: options.approval,
      durability: options.durability,
      beforeAnswer: options.beforeAnswer,
      delivered: (node) => this.#deliverSoon(node),
      count: () => {
        if (this.#running++ === 0) this.#hold();
      },
      uncount: () => this.#uncount(),
      shutDown: () => this.#shutDown,
      keepsSaved: (node) => this.#keepsSaved(node),
    });
    this.#hostView = {
      events: this.#events,
      requests: this.#requests,
      durability: options.durability,
      runTask: (node, request) => this.runTask(node, request),
      // (Called inside dispatch when a slot is free at once: before the handle is known here.)
      placed: (node, attempt, placement) => {
        if (node.attempt !== attempt || node.phase === 'ended') return;
        node.threadId = placement.threadId;
        node.host = placement.host;
        node.dispatchedAt = placement.at;
        if (node.phase === 'queued') node.phase = 'running';
      },
      checkpointed: (node, state, started) => {
        this.#tokensSoFar(node, state);
        // A lost attempt goes on from this turn: the calls started before it are not run again.
        if (node.rerun !== undefined) {
          node.rerun = { kind: 'resume', state, answers: NO_ANSWERS, approvedCalls: NO_APPROVED, started };
        }
      },
    };
    const events = options.events;
    this.#transport.start({
      clock: options.clock,
      emit: (name, payload) => (events.emit as (n: string, p: unknown) => boolean)(name, payload),
      listening: (name) => this.#events.has(name),
    });
  }

  /** This thread's runner of parent agents' loops (its slots: for Troupe's own tests). */
  get local(): LocalRunner {
    return this.#local;
  }

  /** The transport the tree runs subagents on. */
  get transport(): RunTransport {
    return this.#transport;
  }

  // ── Roots ─────────────────────────────────────────────────────────────────

  /**
   * Start a root run and return its node (registered, and so cancellable,
   * before anything announces it). Throws for bad input only.
   */
  startRoot(spec: RootSpec): RunNode {
    const node = this.#rootNode(spec);
    if (spec.childUsage !== undefined) node.childUsage = spec.childUsage;
    this.#begin(node);
    if (spec.kind === 'message') {
      this.#events.runStarted(node, false);
      void this.#runLocal(node, {
        input: spec.input === '' ? undefined : spec.input,
        state: spec.state as LoopState,
        beforeRun: spec.beforeRun,
        interrupted: spec.interrupted,
      });
    } else {
      // A direct spawn is a spawn like any other: the same events, so a daemon sees its scope cost.
      this.#events.spawned(node, spec.metadata);
      this.#dispatch(node, { kind: 'start', input: spec.input, metadata: spec.metadata });
    }
    return node;
  }

  /**
   * A root that was suspended when it was saved: suspended again, with its
   * questions open under the ids the host already knows.
   */
  restoreRoot(
    spec: RootSpec,
    requests: readonly RestoredRequest[],
    descendants: readonly RestoredRun[] = [],
    earlierChildUsage: Usage = NO_USAGE,
  ): RunNode {
    const root = this.#rootNode(spec);
    root.phase = 'suspended';
    root.state = spec.state;
    this.#o.durability?.restored(root);
    if (spec.state !== undefined) {
      // A message's own tokens so far are its loop's (the conversation's, with this message's turns);
      // its children that ended are in its state (see endedChildUsage), not in another row.
      root.usage = spec.state.usage;
      root.childUsage = endedChildUsage(spec.state, false);
      if (earlierChildUsage !== NO_USAGE) root.childUsage = addUsage(root.childUsage, earlierChildUsage);
    }
    const byId = new Map<string, RunNode>([[root.id, root]]);
    // Parents first: each row's parent is made before it.
    const rows = [...descendants];
    for (let made = true; made && rows.length > 0; ) {
      made = false;
      for (let i = 0; i < rows.length; i++) {
        const r = rows[i] as RestoredRun;
        const parent = byId.get(r.parentRunId);
        if (parent === undefined) continue;
        const node = this.#node({
          id: r.runId as RunId,
          agentId: r.agentId as AgentId,
          kind: 'subagent',
          agent: r.agent,
          parent,
          toolCallId: r.toolCallId,
          scope: root.scope,
          toolContext: root.toolContext,
          timeoutMs: this.#o.subagentTimeoutMs,
          owner: undefined,
        });
        node.phase = 'suspended';
        node.state = r.state;
        node.usage = r.usage;
        node.childUsage = endedChildUsage(r.state, true);
        node.attempt = r.attempt;
        this.#o.durability?.restored(node);
        parent.nextChild = Math.max(parent.nextChild, childNumber(node.agentId));
        byId.set(node.id, node);
        rows.splice(i--, 1);
        made = true;
      }
    }
    const names = new Map<RunNode, Map<string, Request>>();
    for (const r of requests) {
      const node = byId.get(r.runId ?? root.id);
      if (node === undefined) continue;
      const entry = this.#requests.open(node, r.toolCallId, r.local, r.approval, r.id, false, r.call);
      let own = names.get(node);
      if (own === undefined) {
        own = new Map();
        names.set(node, own);
      }
      own.set(r.toolCallId, hostRequest(entry));
    }
    // A state saved before questions were named by the host's ids names them so now (one pass a run).
    for (const [node, own] of names) if (node.state !== undefined) node.state = renameRequests(node.state, own);
    // A run waiting on a child that did not come back goes on without it (deepest first).
    for (const node of [...byId.values()].reverse()) {
      const orphaned = openCalls(node.state as LoopState).some(
        (c) => c.delegated === true && !node.childByCall.has(c.call.id),
      );
      if (orphaned && node.phase === 'suspended') this.#reconsider(node);
    }
    return root;
  }

  /**
   * End every suspended direct spawn (cancelled, `shutdown`, its questions
   * withdrawn): nothing saves a spawn, so nothing could resume it after close.
   */
  endSuspendedSpawns(): void {
    for (const root of [...this.#roots]) {
      if (root.kind === 'spawn' && root.phase === 'suspended' && root.active === 0) this.cancel(root, 'shutdown');
    }
  }

  /**
   * Let go of a suspended root without ending it (its owner stopped; what was
   * saved of it resumes it in another supervisor): its questions leave this
   * supervisor's list, nothing is withdrawn.
   */
  forget(root: RunNode): void {
    if (root.phase !== 'suspended' || root.active > 0) return;
    const stack: RunNode[] = [root];
    for (let n = stack.pop(); n !== undefined; n = stack.pop()) {
      this.#requests.release(n);
      n.phase = 'ended';
      this.#nodes.delete(n.id);
      if (this.#byAgent.get(n.agentId) === n) this.#byAgent.delete(n.agentId);
      for (const child of n.childByCall.values()) if (child.phase !== 'ended') stack.push(child);
    }
    this.#roots.delete(root);
    this.#events.forgetRoot(root);
  }

  #rootNode(spec: RootSpec): RunNode {
    const node = this.#node({
      id: spec.runId ?? createId('run'),
      agentId: spec.agentId,
      kind: spec.kind,
      agent: spec.agent,
      parent: undefined,
      toolCallId: undefined,
      scope: spec.scope,
      toolContext: spec.toolContext,
      timeoutMs: spec.timeoutMs,
      owner: spec.owner,
      conversation: spec.conversation,
    });
    node.nextChild = spec.nextChild ?? 0;
    if (spec.attempt !== undefined) node.attempt = spec.attempt;
    this.#roots.add(node);
    if (spec.onDeltas !== undefined) this.#events.onDeltas(node, spec.onDeltas);
    return node;
  }

  /** Resolves with what the root's owner makes of its tree the next time nothing of it runs. */
  whenQuiet(root: RunNode): Promise<unknown> {
    return new Promise((resolve) => this.onQuiet(root, resolve));
  }

  /** Calls `callback` with what the root's owner makes of its tree the next time nothing of it runs. */
  onQuiet(root: RunNode, callback: (reply: unknown) => void): void {
    if (root.quiet === undefined) root.quiet = [callback];
    else root.quiet.push(callback);
    if (root.active === 0) this.#quiet(root);
  }

  /** Subscribe to the model deltas of a root's whole tree; returns the unsubscribe. */
  onDeltas(root: RunNode, listener: DeltaListener): () => void {
    return this.#events.onDeltas(root, listener);
  }

  // ── Running ───────────────────────────────────────────────────────────────

  #node(init: {
    readonly id: RunId;
    readonly agentId: AgentId;
    readonly kind: RunKind;
    readonly agent: Agent;
    readonly parent: RunNode | undefined;
    readonly toolCallId: string | undefined;
    readonly scope: Scope;
    readonly toolContext: Readonly<Record<string, unknown>>;
    readonly timeoutMs: number | undefined;
    readonly owner: RootOwner | undefined;
    readonly conversation?: SavedConversation | undefined;
  }): RunNode {
    if (this.#byAgent.has(init.agentId)) {
      throw new InvalidArgumentError(`agent ${init.agentId} is already running: give each run its own id`);
    }
    const node = new RunNode(init);
    // A child born while an ancestor is being (or was) cancelled is cancelled too: a cancelled
    // run's descendants all are, so the parent's own record settles it.
    if (init.parent?.cancelled !== undefined) node.cancelled = 'parent';
    this.#nodes.set(node.id, node);
    this.#byAgent.set(node.agentId, node);
    return node;
  }

  // A node starts (or resumes) running: counted until its own work ends.
  #begin(node: RunNode): void {
    node.phase = 'queued';
    node.attempt++;
    node.root.active++;
    if (this.#running++ === 0) this.#hold();
    // Each (re)dispatch gets its own deadline, never past its parent's; time spent waiting for a
    // person does not count.
    const timeoutMs = node.timeoutMs;
    let deadline = timeoutMs === undefined ? undefined : this.#clock.now() + timeoutMs;
    const cap = node.parent?.deadline;
    if (cap !== undefined && (deadline === undefined || cap < deadline)) deadline = cap;
    node.deadline = deadline;
    if (deadline !== undefined) this.#deadlines.watch(node);
  }

  // While anything runs, the process stays alive (a script awaiting `send` must not exit
  // under it). One interval, ref'd and unref'd: cheaper than making one per run.
  #hold(): void {
    this.#keepAlive ??= setInterval(() => {}, 1 << 30);
    this.#keepAlive.ref();
  }

  #release(): void {
    this.#keepAlive?.unref();
  }

  // The end of something counted in #running that is not a run's own work (an answer being saved).
  #uncount(): void {
    if (--this.#running !== 0) return;
    this.#release();
    if (this.#idle.length > 0) for (const resolve of this.#idle.splice(0)) resolve();
  }

  // A parent agent's loop, on this thread.
  async #runLocal(
    node: RunNode,
    input: {
      readonly input?: string | undefined;
      readonly state: LoopState;
      readonly answers?: readonly ResumeAnswer[] | undefined;
      readonly approvedCalls?: readonly string[];
      readonly beforeRun?: ((root: RunNode) => Promise<void>) | undefined;
      readonly interrupted?:
        | { readonly started: ReadonlySet<string>; readonly lost?: ReadonlyMap<string, Usage> | undefined }
        | undefined;
    },
  ): Promise<void> {
    node.phase = 'running';
    if (input.beforeRun !== undefined) {
      try {
        await input.beforeRun(node);
      } catch (error) {
        const failed: RunEnd = {
          status: 'failed',
          error: error instanceof Error ? error : new Error(String(error)),
          events: NO_EVENTS,
          turns: 0,
        };
        this.#ownEnded(node, failed, NO_USAGE, input.state);
        return;
      }
    }
    const { end, usage, state } = await this.#local.run(node, {
      input: input.input,
      state: input.state,
      answers: input.answers,
      approvedCalls: input.approvedCalls,
      interrupted: input.interrupted,
      approval: this.#requests.approvalFor(node),
      spawner: node.agent.subagents.length === 0 ? undefined : { runTask: (r) => this.runTask(node, r) },
      events: this.#events.sink(node),
      onQuestion: (toolCallId, request) => this.#requests.question(node, toolCallId, request),
      onDelta: this.#events.streamed(node) ? (delta) => this.#events.deltas(node, [delta]) : undefined,
      checkpoints: this.#checkpointsFor(node),
      // A tool's ctx.cancel(): the tree records it and stops the run's subtree at once.
      onCancel: (reason) => {
        this.cancel(node, reason);
      },
    });
    this.#ownEnded(node, end, usage, state);
  }

  // A subagent's attempt, on the transport. Not async: one `then` on the attempt's end, no async
  // frame per run.
  #dispatch(node: RunNode, work: AttemptWork): void {
    const features =
      HostFeature.approval |
      (node.agent.subagents.length > 0 ? HostFeature.spawn : 0) |
      this.#events.telemetryBits() |
      (this.#events.streamed(node) ? HostFeature.stream : 0) |
      (this.#checkpointsFor(node) !== undefined ? HostFeature.durable : 0);
    const deadline = node.deadline;
    // With a durable store its tools start after a checkpoint: lost, it can be run again.
    node.rerun = (features & HostFeature.durable) !== 0 ? work : undefined;
    node.threadId = undefined;
    node.host = undefined;
    node.dispatchedAt = undefined;
    const handle = this.#transport.dispatch(
      new RunAttempt(node, this.#hostView, {
        capability: mintCapability(),
        work,
        timeoutMs: deadline === undefined ? undefined : Math.max(0, deadline - this.#clock.now()),
        features,
      }),
    );
    node.handle = handle;
    handle.ended.then((end) => this.#attemptEnded(node, end));
  }

  // The transport ended the node's attempt (every event of it was delivered before).
  #attemptEnded(node: RunNode, ae: AttemptEnd): void {
    node.handle = undefined;
    if (ae.end.status === 'lost' && this.#rerun(node)) return;
    const end = ae.end;
    if (end.status === 'failed' && end.error instanceof ToolTimeoutError && end.error.forced) {
      this.#events.killedCall(node, end.error);
    }
    this.#events.forgetRun(node);
    // Its calls wait no more: it holds no slot.
    this.#unblock(node, true);
    this.#ownEnded(node, end, ae.usage, end.status === 'suspended' ? end.state : undefined);
  }

  /**
   * An attempt was lost (whatever ran it vanished): run the node again, as its next attempt, from
   * the last turn it checkpointed (or as it was dispatched, when it lost before its first: no tool
   * of it had started) — its calls that had started and are not idempotent are not run again (the
   * model gets `ERR_INTERRUPTED`), and every write of the lost attempt is fenced by the store (its
   * attempt is lower). Without checkpoints (a store that does not survive the process), past the
   * bound, or once it is cancelled, the attempt ends as a crash.
   */
  #rerun(node: RunNode): boolean {
    const work = node.rerun;
    if (work === undefined || node.cancelled !== undefined || node.lost >= MAX_LOST_ATTEMPTS) return false;
    node.lost++;
    node.attempt++;
    node.phase = 'queued';
    this.#events.forgetRun(node);
    this.#dispatch(node, work);
    return true;
  }

  // destroy() leaves what was saved as it was (running, suspended, its questions open): the next
  // supervisor finds it interrupted, or still waiting, and resumes it. A close() or a stopAgent()
  // that cuts a run saves its end like any cancel: the host is told it was cancelled, and a
  // cancelled run never comes back to end done.
  #keepsSaved(node: RunNode): boolean {
    return this.#leaveSaved && (node.root.cancelled === 'shutdown' || node.cancelled === 'shutdown');
  }

  /** From now on, runs a shutdown cancels are left as saved (destroy(): nothing more is written). */
  leaveSavedOnShutdown(): void {
    this.#leaveSaved = true;
  }

  /** Whether a run a shutdown cancels is left as saved (see {@link RunTree.leaveSavedOnShutdown}). */
  get leavesSaved(): boolean {
    return this.#leaveSaved;
  }

  // A durable store gets every turn of a saved tree's runs.
  #checkpointsFor(node: RunNode): TurnCheckpoints | undefined {
    const d = this.#o.durability;
    if (d === undefined || !d.durable || node.root.conversation === undefined) return undefined;
    return {
      beforeCalls: (state, calls) => {
        this.#tokensSoFar(node, state);
        return d.beforeCalls(node, state, calls);
      },
      afterTurn: (state, calls) => {
        this.#tokensSoFar(node, state);
        return d.afterTurn(node, state, calls);
      },
    };
  }

  /**
   * A running node's tokens so far are its loop state's (a turn's model call is in it before the
   * turn's tools start): its row carries them, so a crash inside a tool loses none of what the run
   * spent. A worker's state is its claim: taken only when it is a usage.
   */
  #tokensSoFar(node: RunNode, state: LoopState): void {
    const usage: unknown = (state as { usage?: unknown } | undefined)?.usage;
    if (node.end === undefined && isUsage(usage)) node.usage = usage;
  }

  // ── Ends and propagation ──────────────────────────────────────────────────

  /** A node's own work ended (its loop returned, its attempt ended). */
  #ownEnded(node: RunNode, end: RunEnd, usage: Usage, state: LoopState | undefined): void {
    if (end.status === 'lost') end = lostEnd(node, end.error);
    node.usage = usage;
    this.#requests.runEnded(node);
    this.#deadlines.unwatch(node);
    node.root.active--;
    if (--this.#running === 0) this.#release();
    // A cancelled run never ends `done`: a result that raced its cancel is a cancel.
    const reason = node.cancelled;
    if (reason !== undefined && end.status !== 'cancelled' && end.status !== 'crashed') {
      end = { status: 'cancelled', reason, forced: false };
    }
    if (end.status === 'suspended') {
      node.phase = 'suspended';
      node.state = state ?? end.state;
      this.#reconsider(node);
    } else {
      node.end = end;
      node.phase = 'draining';
      if (node.kind === 'message' && state !== undefined) node.state = state;
      this.#drain(node);
    }
    this.#afterChange(node.root);
  }

  // A node whose own work is final: stop what is left of its subtree, then end.
  #drain(node: RunNode): void {
    this.#requests.withdrawAll(node, 'the run ended');
    if (node.liveChildren > 0 && node.end?.status !== 'done') this.cancel(node, 'parent');
    this.#maybeEnd(node);
  }

  #maybeEnd(node: RunNode): void {
    if (node.phase !== 'draining' || node.liveChildren > 0) return;
    node.phase = 'ended';
    const total = totalOf(node);
    // A parent agent's message is reported by its owner.
    if (node.kind !== 'message') this.#events.outcome(node, total);
    const d = this.#o.durability;
    // A message's root is saved by its parent agent, with the envelope and the reply (one transaction).
    if (d !== undefined && node.kind !== 'message' && !this.#keepsSaved(node)) {
      d.ended(node, (node.end as FinalEnd).status).catch((error: unknown) => this.#events.saveFailed(node, error));
    }
    this.#nodes.delete(node.id);
    if (this.#byAgent.get(node.agentId) === node) this.#byAgent.delete(node.agentId);
    const parent = node.parent;
    if (parent === undefined) {
      this.#roots.delete(node);
      this.#events.forgetRoot(node);
      this.#afterChange(node);
      return;
    }
    parent.liveChildren--;
    parent.childUsage = addUsage(parent.childUsage, total);
    const result = taskResultOf(node, parent.agent.mergeMetadataFrom.has(node.agent.name));
    const waiter = node.waiter;
    if (waiter !== undefined) {
      // The parent's `task` call awaits it (or did, until the parent's cancel abandoned the call).
      node.waiter = undefined;
      waiter(result);
    } else if (parent.phase === 'suspended' && parent.state !== undefined && node.toolCallId !== undefined) {
      parent.state = resolveDelegatedCall(parent.state, node.toolCallId, result);
      if (node.deferredAt !== undefined)
        this.#events.deferredCallStopped(parent, node.toolCallId, node.deferredAt, result);
      this.#reconsider(parent);
    }
    // A parent whose own work is over ends with its last child; a running one picks the
    // result up when it suspends (see #reconsider).
    if (parent.phase === 'draining') this.#maybeEnd(parent);
  }

  /**
   * A suspended node: take what its children and its answers have for it,
   * then resume it if it can go on (with every answer that reached it: each
   * answered call re-runs once, all in one resume), end it if it was
   * cancelled, or tell its parent it waits.
   */
  #reconsider(node: RunNode): void {
    if (node.phase !== 'suspended') return;
    const reason = node.cancelled;
    if (reason !== undefined) {
      this.#abandon(node, reason);
      return;
    }
    const review = reviewOpenCalls(node, node.state as LoopState, this.#requests, this.#events);
    const state = review.state;
    node.state = state;
    if (review.answers.length > 0) {
      const answers: ResumeAnswer[] = [];
      const approvedCalls: string[] = [];
      for (const { entry, call } of review.answers) {
        const taken = entry.answer as NonNullable<RequestEntry['answer']>;
        this.#requests.take(entry);
        answers.push({ answer: taken.answer, expired: taken.expired });
        // A yes to an approval runs the call pre-approved only if it is the call the handler was
        // asked about: a worker's state could have put another tool, or other arguments, under its id.
        if (entry.approval && taken.answer.ok && isApprovedCall(entry.call, call)) approvedCalls.push(entry.toolCallId);
      }
      this.#resume(node, { answers, approvedCalls });
      return;
    }
    if (review.open === 0) {
      this.#resume(node, { answers: NO_ANSWERS, approvedCalls: NO_APPROVED });
      return;
    }
    // It stays suspended.
    const d = this.#o.durability;
    if (d !== undefined && node.root.conversation !== undefined) {
      const unsaved: RequestEntry[] = [];
      for (const entry of this.#requests.of(node).values()) {
        if (entry.saved) continue;
        entry.saved = true;
        unsaved.push(entry);
      }
      d.suspended(node, unsaved).catch((error: unknown) => {
        // Not in the store: its answer is taken here (the store cannot take what it never had).
        for (const entry of unsaved) entry.unsaved = true;
        this.#events.saveFailed(node, error);
      });
    }
    const waiter = node.waiter;
    const first = this.#requests.firstOpen(node);
    // Its parent's call learns of a question; a run that only waits on its children (deferred)
    // keeps its parent's call waiting for its end.
    if (waiter !== undefined && first !== undefined) {
      node.waiter = undefined;
      waiter({ status: 'suspended', request: first.request });
    } else if (first !== undefined && node.parent?.phase === 'suspended') {
      // A parent already suspended (deferred, waiting on this run) learns of the question from here.
      this.#reconsider(node.parent);
    }
    if (first !== undefined && node.kind !== 'message') this.#events.suspended(node, first.request.id, totalOf(node));
  }

  #resume(
    node: RunNode,
    input: { readonly answers: readonly ResumeAnswer[]; readonly approvedCalls: readonly string[] },
  ): void {
    const state = node.state as LoopState;
    node.state = undefined;
    this.#begin(node);
    node.root.owner?.resumed?.(node.root);
    if (node.kind === 'message') {
      this.#events.runStarted(node, true);
      void this.#runLocal(node, { state, answers: input.answers, approvedCalls: input.approvedCalls });
    } else {
      this.#events.spawned(node, state.metadata, true);
      this.#dispatch(node, { kind: 'resume', state, ...input });
    }
  }

  /**
   * An answer reached a suspended node: it resumes at the next turn of the event loop, with every
   * answer that reached it by then — answers given together (each taken by the store in turn) are
   * one resume, not one each, so n answers cost one pass over its open calls, not n. Meanwhile it
   * counts as running: its root is not quiet (an `answer()` waits for what the resume does), its
   * owner sees it run again, and a close() drains it.
   */
  #deliverSoon(node: RunNode): void {
    if (this.#delivering.has(node)) return;
    this.#delivering.add(node);
    const root = node.root;
    root.active++;
    if (this.#running++ === 0) this.#hold();
    root.owner?.resumed?.(root);
    setImmediate(() => {
      this.#delivering.delete(node);
      // (Reconsidered first: a resume counts itself before this stops counting.)
      this.#reconsider(node);
      root.active--;
      this.#uncount();
      this.#afterChange(root);
    });
  }

  // A suspended node that was cancelled: nothing of it runs; it ends cancelled, with its subtree.
  #abandon(node: RunNode, reason: CancelReason): void {
    node.end = { status: 'cancelled', reason, forced: false };
    node.phase = 'draining';
    this.#requests.withdrawAll(node, `the run was cancelled (${reason})`);
    for (const child of node.childByCall.values()) if (child.phase === 'suspended') this.#reconsider(child);
    this.#maybeEnd(node);
  }

  #afterChange(root: RunNode): void {
    // An ended root is reported to its owner even when nobody waits (a cancel of a suspended message).
    if (
      root.active === 0 &&
      ((root.quiet !== undefined && root.quiet.length > 0) || (root.phase === 'ended' && !root.reported))
    ) {
      this.#quiet(root);
    }
    if (this.#running === 0 && this.#idle.length > 0) for (const resolve of this.#idle.splice(0)) resolve();
  }

  #quiet(root: RunNode): void {
    // Its own work is over but not its subtree's: it is quiet only once it has ended.
    if (root.phase === 'draining') return;
    // Taken whole: a waiter that waits again gets the next quiet.
    const waiters = root.quiet ?? NO_WAITERS;
    root.quiet = undefined;
    if (root.phase === 'ended') {
      if (root.reported && waiters.length === 0) return;
      root.reported = true;
    } else if (waiters.length === 0) return;
    const owner = root.owner as RootOwner;
    let reply: unknown;
    try {
      reply = owner.settle(root);
    } catch (error) {
      reply = error;
    }
    if (reply instanceof Promise) {
      reply.then(
        (value: unknown) => {
          for (const resolve of waiters) resolve(value);
        },
        (error: unknown) => {
          for (const resolve of waiters) resolve(error);
        },
      );
      return;
    }
    // A reply made at once (a spawn's outcome): no promise hop on every run's way back.
    for (const resolve of waiters) resolve(reply);
  }

  // ── Delegation ────────────────────────────────────────────────────────────

  /**
   * Run a `task` call of `parent`: a child node, on the transport. Resolves
   * with the child's outcome as the parent's `task` call sees it, or
   * `suspended` as soon as the child waits on a person (its question is open
   * already).
   */
  async runTask(parent: RunNode, request: TaskRequest): Promise<TaskResult> {
    const name = typeof request.subagent === 'string' ? request.subagent : request.subagent.name;
    const declared = subagentNamed(parent.agent, name);
    if (declared === undefined) {
      return taskError(
        new TroupeError(`"${name}" is not a subagent of ${parent.agent.name}; declare it in subagents`, {
          code: 'ERR_UNKNOWN_AGENT',
        }),
      );
    }
    if (parent.childByCall.has(request.toolCallId)) {
      return taskError(
        new TroupeError(`task call ${request.toolCallId} of ${parent.agentId} already has a child run`, {
          code: 'ERR_PROTOCOL',
        }),
      );
    }
    if (!this.#transport.canQueue()) return taskError(this.backpressure());
    // Numbered in call order, before the child's module may have to load.
    const agentId = subagentId(parent.agentId, ++parent.nextChild);
    // A definition loaded already comes at once: awaiting it would hold back every child of a
    // turn's fan-out until all its calls had reached this line (the threads idle meanwhile).
    let agent: Agent;
    try {
      const found = definitionOf(declared);
      agent = found instanceof Promise ? await found : found;
    } catch (error) {
      return taskError(error as Error);
    }
    if (parent.phase === 'ended' || parent.phase === 'draining') {
      return taskError(new TroupeError(`${parent.agentId} ended before its task started`, { code: 'ERR_CANCELLED' }));
    }
    const child = this.#node({
      id: createId('run'),
      agentId,
      kind: 'subagent',
      agent,
      parent,
      toolCallId: request.toolCallId,
      scope: parent.scope,
      toolContext: parent.toolContext,
      timeoutMs: this.#o.subagentTimeoutMs,
      owner: undefined,
    });
    // A worker parent that waits on a task call holds its slot. Were every slot held so, no
    // child could ever run (a tree deeper than the pool would deadlock): the call that would make
    // it so is deferred instead — the parent suspends once its turn's other calls are done, gives
    // its slot up, and resumes (on any slot) when the child has ended.
    const worker = parent.kind !== 'message';
    const deferred = worker && this.#blocked.size + (this.#blocked.has(parent) ? 0 : 1) >= this.#transport.slots;
    let result: Promise<TaskResult>;
    if (deferred) {
      child.deferredAt = this.#clock.now();
      result = Promise.resolve<TaskResult>({
        status: 'suspended',
        request: { id: `deferred-${agentId}`, kind: DEFERRED_TASK_KIND, prompt: '' },
      });
    } else {
      result = new Promise<TaskResult>((resolve) => {
        child.waiter = resolve;
      });
      if (worker) {
        parent.waitingCalls++;
        this.#blocked.add(parent);
        result = result.then((r) => {
          this.#unblock(parent);
          return r;
        });
      }
    }
    this.#events.spawned(child, request.metadata);
    this.#begin(child);
    this.#dispatch(child, { kind: 'start', input: request.instructions, metadata: request.metadata });
    return result;
  }

  /** The error a spawn gets when the transport's queue is full. */
  backpressure(): BackpressureError {
    const queued = this.#transport.stats().queued;
    return new BackpressureError(
      `the subagent queue is full (${queued} runs waiting for a slot on the ${this.#transport.name} transport): retry later or raise pool.maxQueue`,
      queued,
    );
  }

  /** Whether one more subagent run may wait for a slot (the transport's queue bound). */
  canQueue(): boolean {
    return this.#transport.canQueue();
  }

  // One task call of a worker run got its reply (or the run ended, with every call: `all`).
  #unblock(node: RunNode, all = false): void {
    if (node.waitingCalls === 0) return;
    node.waitingCalls = all ? 0 : node.waitingCalls - 1;
    if (node.waitingCalls === 0) this.#blocked.delete(node);
  }

  /** The questions and approvals of every run of the tree (human in the loop). */
  get requests(): RequestBook {
    return this.#requests;
  }

  // ── Cancellation ──────────────────────────────────────────────────────────

  /**
   * Cancel a node and its subtree (the node with `reason`, every descendant
   * with `parent`): running runs see it at once (whatever runs them kills
   * what ignores it after the grace period), queued ones leave the queue,
   * suspended ones end cancelled with their questions withdrawn. Returns
   * false when it was over or already cancelled.
   */
  cancel(node: RunNode, reason: CancelReason): boolean {
    if (node.phase === 'ended' || node.cancelled !== undefined) return false;
    const suspended: RunNode[] = [];
    const stack: RunNode[] = [node];
    for (let n = stack.pop(); n !== undefined; n = stack.pop()) {
      // Invariant: a cancelled run's descendants all are, so a cancelled child is not descended.
      if (n !== node && n.cancelled !== undefined) continue;
      const why = n === node ? reason : 'parent';
      n.cancelled = why;
      if (n.handle !== undefined) this.#transport.cancel(n.handle, why);
      else if (n.phase === 'running' && n.kind === 'message') this.#local.cancel(n, why);
      if (n.phase === 'suspended') suspended.push(n);
      for (const child of n.childByCall.values()) if (child.phase !== 'ended') stack.push(child);
    }
    // Deepest first: each ends before its parent looks at it.
    for (let i = suspended.length - 1; i >= 0; i--) this.#reconsider(suspended[i] as RunNode);
    this.#afterChange(node.root);
    return true;
  }

  /** Cancel the run of agent `agentId` (any depth), if one is live. */
  cancelAgent(agentId: string, reason: CancelReason): boolean {
    const node = this.#byAgent.get(agentId);
    return node === undefined ? false : this.cancel(node, reason);
  }

  /** The live node of agent `agentId`. */
  nodeOf(agentId: string): RunNode | undefined {
    return this.#byAgent.get(agentId);
  }

  // ── Shutdown ──────────────────────────────────────────────────────────────

  /** Resolves once nothing runs anywhere in the tree. */
  whenIdle(): Promise<void> {
    if (this.#running === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  /**
   * Cancel every run that is running (suspended ones keep their questions).
   * With a durable store and reason `shutdown`, what was saved stays as it
   * was: the runs read as interrupted to the next supervisor.
   */
  cancelRunning(reason: CancelReason): void {
    if (reason === 'shutdown') this.#shutDown = true;
    for (const root of [...this.#roots]) {
      if (root.active > 0) this.cancel(root, reason);
    }
  }

  /** Roots alive (running, suspended or ending). */
  get roots(): number {
    return this.#roots.size;
  }

  /** Figures for daemons and leak checks. */
  stats(): {
    runs: number;
    running: number;
    requests: number;
    localSlots: number;
    suspendedBelowRoots: number;
  } {
    let suspended = 0;
    // Waiting on a person somewhere below: a run deferred while its child runs is not.
    for (const node of this.#nodes.values()) {
      if (node.parent !== undefined && node.phase === 'suspended' && this.#requests.firstOpen(node) !== undefined)
        suspended++;
    }
    return {
      runs: this.#nodes.size,
      running: this.#running,
      requests: this.#requests.size,
      localSlots: this.#local.size,
      suspendedBelowRoots: suspended,
    };
  }

  /** Stop the deadlines and the transport once nothing runs. */
  async closeTransport(drainMs: number): Promise<void> {
    this.#deadlines.close();
    await this.#transport.close({ drainMs });
    this.#local.close();
    this.#stopKeepAlive();
  }

  /** Stop everything the transport runs now. */
  async destroyTransport(): Promise<void> {
    this.#deadlines.close();
    await this.#transport.destroy();
    this.#local.close();
    this.#stopKeepAlive();
  }

  #stopKeepAlive(): void {
    if (this.#keepAlive !== undefined) clearInterval(this.#keepAlive);
    this.#keepAlive = undefined;
  }
}

/**
 * What an attempt that was lost (whatever ran it vanished) ends as when the tree does not run it
 * again: a defect of the transport, reported as a crash of the run.
 */
function lostEnd(node: RunNode, error: Error): Extract<RunEnd, { readonly status: 'crashed' }> {
  return {
    status: 'crashed',
    exitCode: null,
    error: new WorkerCrashedError(
      `the attempt ${node.attempt} of ${node.agentId} was lost (${error.message}): whatever ran it vanished; its side effects may have happened`,
      null,
      { cause: error },
    ),
  };
}

function taskError(error: Error): TaskResult {
  return { status: 'error', error, events: NO_EVENTS };
}

// `<parent>-sub-<n>` → n (0 when the id is not one).
function childNumber(agentId: string): number {
  const at = agentId.lastIndexOf('-sub-');
  const n = at < 0 ? 0 : Number(agentId.slice(at + 5));
  return Number.isSafeInteger(n) ? n : 0;
}

/**
 * What a restored run's children that ended have spent, from its saved state: those of its
 * completed turns are in `childUsage` (a subagent run's only; a message's `childUsage` is the
 * conversation's, which its parent agent keeps), those of the turn it is suspended in are on
 * their resolved calls. A restore without it lost what a subtree spent in the process before.
 */
function endedChildUsage(state: LoopState, ownTurns: boolean): Usage {
  let total: Usage = ownTurns ? (state.childUsage ?? NO_USAGE) : NO_USAGE;
  for (const p of state.pending ?? []) {
    if (p.result !== undefined && p.usage !== undefined) total = addUsage(total, p.usage);
  }
  return total;
}

// True when `call` is the call an approval was asked about: the same tool, the same arguments.
function isApprovedCall(
  asked: ApprovedCall | undefined,
  call: { readonly name: string; readonly arguments?: unknown } | undefined,
): boolean {
  if (asked === undefined || call === undefined || call.name !== asked.toolName) return false;
  try {
    return JSON.stringify(call.arguments ?? null) === JSON.stringify(asked.arguments ?? null);
  } catch {
    return false;
  }
}
