import type { ResourceLimits } from 'node:worker_threads';
import {
  type Agent,
  type AgentId,
  type Answer,
  ApprovalDecision,
  type ApprovalHandler,
  addUsage,
  BackpressureError,
  type CancelReason,
  type Clock,
  ClosedError,
  createId,
  InvalidArgumentError,
  isTroupeError,
  type LoopState,
  type Metadata,
  type ModelDelta,
  NO_USAGE,
  type Request,
  type RunId,
  type Scope,
  serializedSize,
  TASK_TOOL_NAME,
  type TaskResult,
  type ToolCallId,
  TroupeError,
  type Usage,
} from '@troupe/core';
import {
  DEFERRED_TASK_KIND,
  decodeError,
  decodeSubagentResult,
  encodeError,
  type HostCheckpoint,
  type HostEvent,
  HostFeature,
  type LoopEventSink,
  type LoopOutcome,
  NO_APPROVAL_HANDLER,
  openCalls,
  parseHostEvents,
  renameRequest,
  resolveDelegatedCall,
  runAgentLoop,
  type SubagentResult,
  slotRunCancellation,
  subagentId,
  TELEMETRY_EVENTS,
  type TurnCheckpoints,
  telemetryBit,
} from '@troupe/core/internal';
import { loadAgent, loadedAgent } from '@troupe/subagent';
import type { EventEmitter } from 'eventemitter3';
import { CancellationTable } from './CancellationTable.js';
import { BASE_FEATURES, Dispatcher, type WorkerEnd } from './internal/Dispatcher.js';
import { isEntryModule } from './internal/entryModule.js';
import { HostChannel, type HostLookup, type HostRun } from './internal/HostChannel.js';
import { RecentMap } from './internal/RecentMap.js';
import {
  type ApprovedCall,
  type FinalEnd,
  firstOpenRequest,
  hostRequest,
  type RequestEntry,
  type RootOwner,
  type RunEnd,
  type RunKind,
  RunNode,
  type SavedConversation,
  taskResultOf,
  totalOf,
} from './internal/RunNode.js';
import { type ThreadInfo, WorkerPool } from './internal/WorkerPool.js';
import type { Durability } from './persistence/Durability.js';
import type { SupervisorEvents } from './SupervisorEvents.js';
import { Watchdog, type WatchdogKillCause } from './Watchdog.js';

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
  readonly threads: number | undefined;
  readonly resourceLimits: ResourceLimits | undefined;
  readonly maxQueue: number;
  readonly graceMs: number;
  readonly watchdogIntervalMs: number;
  readonly tableCapacity: number | undefined;
  /** Default relative deadline of every subagent run and direct spawn. */
  readonly subagentTimeoutMs: number | undefined;
  /** Host-channel messages a thread may send per second before it counts as a flood. */
  readonly floodLimit?: number | undefined;
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
  readonly onDeltas?: ((node: RunNode, deltas: readonly ModelDelta[]) => void) | undefined;
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

/** A request waiting for a person, as the tree lists it. */
export interface OpenRequest {
  readonly request: Request;
  /** The root run's agent (the parent agent holding the conversation, or the spawned agent). */
  readonly agentId: AgentId;
  /** Agent ids from the root down to the run whose tool asked. */
  readonly path: readonly AgentId[];
  readonly openedAt: number;
  readonly runId: RunId;
}

const CLOSED_MEMORY = 10_000;

/** The event announcing each way a subagent run ends. */
const OUTCOME_EVENTS = Object.freeze({
  done: 'subagent.done',
  failed: 'subagent.failed',
  crashed: 'subagent.crashed',
  cancelled: 'subagent.cancelled',
  incomplete: 'subagent.incomplete',
} as const);
const EMPTY: Readonly<Record<string, unknown>> = Object.freeze({});
const NO_EVENTS: readonly never[] = Object.freeze([]);

/**
 * The one owner of every run: each parent message, subagent run and direct
 * spawn is a node with its parent, children, slot, deadline, capability,
 * phase, suspension, questions, and usage — its own and its subtree's.
 * Cancellation, draining, shutdown, request routing and usage walk it; the
 * worker pool is transport only, and delegation is "a task request spawns a
 * child node".
 *
 * Invariants it keeps:
 * - a node ends (phase `ended`) exactly once, and only after its whole
 *   subtree has: no reply precedes the end of its subtree;
 * - a cancelled node never ends `done`;
 * - every event of a run is delivered before its outcome event;
 * - a root's waiters (a `send`, an `answer`, a `spawn`) are answered only
 *   when nothing of its tree runs (quiet): ended, or suspended throughout;
 * - an answer goes to the run whose own tool asked (the deepest); its
 *   outcome flows up into its suspended ancestors' states, each resumed
 *   only once it has nothing left open.
 */
const NO_WAITERS: readonly ((reply: unknown) => void)[] = Object.freeze([]);

export class RunTree {
  readonly table: CancellationTable;
  readonly pool: WorkerPool;
  readonly #o: RunTreeOptions;
  readonly #clock: Clock;
  readonly #events: EventEmitter<SupervisorEvents>;
  readonly #watchdog: Watchdog;
  readonly #dispatcher: Dispatcher;
  readonly #host: HostChannel;
  readonly #nodes = new Map<RunId, RunNode>();
  readonly #byAgent = new Map<string, RunNode>();
  readonly #byCapability = new Map<string, RunNode>();
  // A capability is only ever presented by the run's own late work: a short memory suffices.
  readonly #ended = new RecentMap<
    string,
    { readonly agentId: string; readonly runId: string; readonly thread: ThreadInfo | undefined }
  >(1024);
  readonly #requests = new Map<string, RequestEntry>();
  readonly #closedRequests = new RecentMap<string, 'answered' | 'withdrawn'>(CLOSED_MEMORY);
  readonly #roots = new Set<RunNode>();
  readonly #streams = new Map<RunNode, Set<(node: RunNode, deltas: readonly ModelDelta[]) => void>>();
  readonly #idle: (() => void)[] = [];
  /** A shutdown cancelled what ran (close()'s deadline, destroy()): no answer resumes a run after it. */
  #shutDown = false;
  /** Nodes queued or running anywhere (a process keep-alive is held while > 0). */
  #running = 0;
  #keepAlive: ReturnType<typeof setInterval> | undefined;
  #workerRuns = 0;
  /** Worker runs waiting on a task call of theirs (each holds its thread meanwhile). */
  readonly #blocked = new Set<RunNode>();
  #completed = 0;

  constructor(options: RunTreeOptions) {
    this.#o = options;
    this.#clock = options.clock;
    this.#events = options.events;
    this.table = new CancellationTable({
      clock: options.clock,
      ...(options.tableCapacity === undefined ? {} : { capacity: options.tableCapacity }),
    });
    this.#host = new HostChannel({
      clock: options.clock,
      lookup: (capability, thread) => this.#lookup(capability, thread),
      recycle: (thread, reason) => this.#recycle(thread, reason),
      refused: (refusal) => {
        if (this.#has('host.refused')) this.#events.emit('host.refused', refusal);
      },
      floodLimit: options.floodLimit,
    });
    this.pool = new WorkerPool({
      threads: options.threads,
      resourceLimits: options.resourceLimits,
      // The queue is the pool's own (runs wait there, not in piscina): piscina's is a backstop.
      maxQueue: options.maxQueue + (options.threads ?? 64),
      table: this.table,
      onHostPort: (thread, port) => this.#host.bind(thread, port),
      onViolation: (thread, reason) => {
        this.#recycle(thread, `it sent ${reason}`);
        if (this.#has('host.refused')) {
          this.#events.emit('host.refused', {
            threadId: thread.id,
            reason,
            op: undefined,
            agentId: undefined,
            runId: undefined,
            recycled: true,
            at: this.#clock.now(),
          });
        }
      },
      onThreadGone: () => {},
    });
    this.#watchdog = new Watchdog({
      table: this.table,
      clock: options.clock,
      graceMs: options.graceMs,
      intervalMs: options.watchdogIntervalMs,
      kill: (key, cause) => this.#kill(key, cause),
    });
    this.#dispatcher = new Dispatcher({
      pool: this.pool,
      table: this.table,
      clock: options.clock,
      track: (node) => {
        // From now on the run's capability is good on this thread's channel, and only there.
        if (node.capability !== undefined) this.#byCapability.set(node.capability, node);
        node.dispatchedAt = this.#clock.now();
        this.#watchdog.track(node.id);
        if (this.table.isCancelled(node.id)) this.#watchdog.cancelled(node.id);
      },
    });
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
      this.#emitRunStarted(node, false);
      void this.#runLocal(node, {
        input: spec.input === '' ? undefined : spec.input,
        state: spec.state as LoopState,
        beforeRun: spec.beforeRun,
        interrupted: spec.interrupted,
      });
    } else {
      // A direct spawn is a spawn like any other: the same events, so a daemon sees its scope cost.
      this.#emitSpawned(node, spec.metadata);
      void this.#runWorker(node, { input: spec.input, metadata: spec.metadata });
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
    root.persisted = true;
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
        node.persisted = true;
        parent.nextChild = Math.max(parent.nextChild, childNumber(node.agentId));
        byId.set(node.id, node);
        rows.splice(i--, 1);
        made = true;
      }
    }
    for (const r of requests) {
      const node = byId.get(r.runId ?? root.id);
      if (node === undefined) continue;
      const entry = this.#open(node, r.toolCallId, r.local, r.approval, r.id, false, r.call);
      // A state saved before questions were named by the host's ids names them so now.
      if (node.state !== undefined) node.state = renameRequest(node.state, r.toolCallId, hostRequest(entry));
    }
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
   * Let go of a suspended root without ending it (its owner stopped; what was
   * saved of it resumes it in another supervisor): its questions leave this
   * supervisor's list, nothing is withdrawn.
   */
  /**
   * End every suspended direct spawn (cancelled, `shutdown`, its questions
   * withdrawn): nothing saves a spawn, so nothing could resume it after close.
   */
  endSuspendedSpawns(): void {
    for (const root of [...this.#roots]) {
      if (root.kind === 'spawn' && root.phase === 'suspended' && root.active === 0) this.cancel(root, 'shutdown');
    }
  }

  forget(root: RunNode): void {
    if (root.phase !== 'suspended' || root.active > 0) return;
    const stack: RunNode[] = [root];
    for (let n = stack.pop(); n !== undefined; n = stack.pop()) {
      for (const entry of n.requests.values()) this.#requests.delete(entry.id);
      n.clearRequests();
      n.phase = 'ended';
      this.table.release(n.id);
      this.#nodes.delete(n.id);
      if (this.#byAgent.get(n.agentId) === n) this.#byAgent.delete(n.agentId);
      for (const child of n.childByCall.values()) if (child.phase !== 'ended') stack.push(child);
    }
    this.#roots.delete(root);
    this.#streams.delete(root);
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
    if (spec.onDeltas !== undefined) this.#streams.set(node, new Set([spec.onDeltas]));
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
  onDeltas(root: RunNode, listener: (node: RunNode, deltas: readonly ModelDelta[]) => void): () => void {
    let set = this.#streams.get(root);
    if (set === undefined) {
      set = new Set();
      this.#streams.set(root, set);
    }
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0) this.#streams.delete(root);
    };
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
    this.table.register(init.id, { parent: init.parent?.id, slot: 'deferred' });
    const node = new RunNode(init);
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
    // Each (re)dispatch gets its own deadline; time spent waiting for a person does not count.
    const timeoutMs = node.timeoutMs;
    if (timeoutMs !== undefined) this.table.setDeadline(node.id, this.#clock.now() + timeoutMs);
    else if (node.attempt > 1 || node.parent !== undefined) this.table.setDeadline(node.id, undefined);
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

  #stopKeepAlive(): void {
    if (this.#keepAlive !== undefined) clearInterval(this.#keepAlive);
    this.#keepAlive = undefined;
  }

  async #runLocal(
    node: RunNode,
    input: {
      readonly input?: string | undefined;
      readonly state: LoopState;
      readonly answer?: Answer | undefined;
      readonly approvedCalls?: readonly string[];
      readonly expired?: boolean;
      readonly beforeRun?: ((root: RunNode) => Promise<void>) | undefined;
      readonly interrupted?:
        | { readonly started: ReadonlySet<string>; readonly lost?: ReadonlyMap<string, Usage> | undefined }
        | undefined;
    },
  ): Promise<void> {
    node.phase = 'running';
    const clock = this.#clock;
    let outcome: LoopOutcome;
    if (input.beforeRun !== undefined) {
      try {
        await input.beforeRun(node);
      } catch (error) {
        this.#ownEnded(
          node,
          {
            status: 'failed',
            error: error instanceof Error ? error : new Error(String(error)),
            events: NO_EVENTS,
            turns: 0,
          },
          NO_USAGE,
          input.state,
        );
        return;
      }
    }
    const handle = this.table.bind(node.id, this.table.local);
    const cancellation = slotRunCancellation(this.table.slots, handle, {
      deadline: this.table.deadlineOf(node.id) ?? null,
      clock,
      // A tool's ctx.cancel(): the tree records it and stops the run's subtree at once.
      onCancel: (reason) => {
        this.cancel(node, reason);
      },
    });
    try {
      outcome = await runAgentLoop({
        agent: node.agent,
        run: { scope: node.scope, toolContext: node.toolContext, agentId: node.agentId, parentAgentId: undefined },
        state: input.state,
        input: input.input,
        answer: input.answer,
        expired: input.expired,
        approvedCalls: input.approvedCalls === undefined ? undefined : new Set(input.approvedCalls),
        clock,
        cancellation,
        approval: this.approvalFor(node),
        spawner: node.agent.subagents.length === 0 ? undefined : { runTask: (r) => this.runTask(node, r) },
        events: this.#sink(node),
        onQuestion: (toolCallId, request) => this.#question(node, toolCallId, request),
        onDelta: this.#streamed(node) ? (delta) => this.#deltas(node, [delta]) : undefined,
        checkpoints: this.#checkpointsFor(node),
        interrupted: input.interrupted,
      });
    } finally {
      cancellation.close();
      this.table.unbind(node.id);
    }
    this.#ownEnded(node, endOfLoop(outcome), outcome.state.usage, outcome.state);
  }

  // Not async: one `then` on the dispatch, no async frame per run.
  #runWorker(
    node: RunNode,
    input: {
      readonly input?: string;
      readonly metadata?: Metadata | undefined;
      readonly resume?: {
        readonly state: LoopState;
        readonly answer: Answer | undefined;
        readonly approvedCalls: readonly string[];
        readonly expired: boolean;
        readonly started?: readonly string[] | undefined;
      };
    },
  ): void {
    this.#workerRuns++;
    node.received = 0;
    node.expect = undefined;
    const features =
      BASE_FEATURES |
      (node.agent.subagents.length > 0 ? HostFeature.spawn : 0) |
      this.#telemetryBits() |
      (this.#streamed(node) ? HostFeature.stream : 0) |
      (this.#checkpointsFor(node) !== undefined ? HostFeature.durable : 0);
    this.#dispatcher.run(node, input, features).then((we) => this.#workerAnswered(node, we));
  }

  // The worker answered (or its thread died): wait for the events it says it posted, then end its work.
  #workerAnswered(node: RunNode, we: WorkerEnd): void {
    this.#workerRuns--;
    this.#completed++;
    const thread = node.thread;
    this.#watchdog.untrack(node.id);
    // Every event the run posted arrives before its outcome is handled.
    if (
      node.received < we.sent &&
      thread !== undefined &&
      thread.exitCode === undefined &&
      thread.recycled === undefined
    ) {
      // A promise, not a callback: its reaction runs in this run's async context (the one
      // the dispatch came from, which a host's tracing follows), not the message handler's.
      new Promise<void>((resolve) => {
        node.expect = { sent: we.sent, resolve };
        // A worker that claims more than it sent gets the grace period, not more.
        node.expectTimer = this.#clock.setTimeout(() => {
          if (node.expect !== undefined) {
            node.expect = undefined;
            resolve();
          }
        }, this.#o.graceMs);
      }).then(() => this.#workerEnded(node, we));
      return;
    }
    this.#workerEnded(node, we);
  }

  #workerEnded(node: RunNode, we: WorkerEnd): void {
    const thread = node.thread;
    // Its last events came with the result: after the batches it posted, before its outcome.
    if (we.tail !== undefined && thread?.recycled === undefined) this.#workerTail(node, we.tail);
    const held = node.held;
    node.held = undefined;
    let end = we.end;
    let usage = we.usage;
    if (held !== undefined && (end.status === 'crashed' || node.kill !== undefined)) {
      // The worker finished the run, then was recycled for the work it left behind.
      end = held.end.status === 'cancelled' ? { ...held.end, forced: true } : held.end;
      usage = held.usage;
    }
    if (node.capability !== undefined) {
      this.#byCapability.delete(node.capability);
      // Only a run that used its channel can have late messages on it.
      if (node.talked) this.#rememberEnded(node.capability, node);
    }
    node.talked = false;
    if (node.kill?.kind === 'lane-timeout' && end.status === 'failed') this.#reportKilledCall(node, end.error);
    node.capability = undefined;
    node.kill = undefined;
    node.ticket = undefined;
    node.lastToolStart = undefined;
    // Its calls wait no more: it holds no thread.
    this.#unblock(node, true);
    // Its thread is done with its slot: freed before anything can resume the run on another thread
    // (a suspended run whose children already ended resumes at once, inside #ownEnded).
    this.table.unbind(node.id);
    this.#ownEnded(node, end, usage, end.status === 'suspended' ? end.state : undefined);
  }

  // destroy() leaves what was saved as it was (running, suspended, its questions open): the next
  // supervisor finds it interrupted, or still waiting, and resumes it. A close() or a stopAgent()
  // that cuts a run saves its end like any cancel: the host is told it was cancelled, and a
  // cancelled run never comes back to end done.
  #keepsSaved(node: RunNode): boolean {
    return (
      this.#leaveSaved && (this.table.reason(node.root.id) === 'shutdown' || this.table.reason(node.id) === 'shutdown')
    );
  }

  #leaveSaved = false;

  /** From now on, runs a shutdown cancels are left as saved (destroy(): nothing more is written). */
  leaveSavedOnShutdown(): void {
    this.#leaveSaved = true;
  }

  /** Whether a run a shutdown cancels is left as saved (see {@link RunTree.leaveSavedOnShutdown}). */
  get leavesSaved(): boolean {
    return this.#leaveSaved;
  }

  #saveFailed(node: RunNode, error: unknown): void {
    if (!this.#has('persistence.failed')) return;
    this.#events.emit('persistence.failed', {
      agentId: node.agentId,
      runId: node.id,
      error: error instanceof Error ? error : new Error(String(error)),
      at: this.#clock.now(),
    });
  }

  // A durable store gets every turn of a saved tree's runs.
  #checkpointsFor(node: RunNode): TurnCheckpoints | undefined {
    const d = this.#o.durability;
    if (d === undefined || !d.durable || node.root.conversation === undefined) return undefined;
    return {
      beforeCalls: (state, calls) => d.beforeCalls(node, state, calls),
      afterTurn: (state, calls) => d.afterTurn(node, state, calls),
    };
  }

  // ── Ends and propagation ──────────────────────────────────────────────────

  /** A node's own work ended (its loop returned, its worker answered or died). */
  #ownEnded(node: RunNode, end: RunEnd, usage: Usage, state: LoopState | undefined): void {
    node.usage = usage;
    node.ended?.abort(new TroupeError(`run ${node.agentId} ended`, { code: 'ERR_CANCELLED' }));
    node.ended = undefined;
    node.root.active--;
    if (--this.#running === 0) this.#release();
    // A cancelled run never ends `done`: a result that raced its cancel is a cancel.
    const reason = this.table.reason(node.id);
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
    if (node.requests.size > 0) for (const entry of [...node.requests.values()]) this.#withdraw(entry, 'the run ended');
    if (node.liveChildren > 0 && node.end?.status !== 'done') this.cancel(node, 'parent');
    this.#maybeEnd(node);
  }

  #maybeEnd(node: RunNode): void {
    if (node.phase !== 'draining' || node.liveChildren > 0) return;
    node.phase = 'ended';
    this.#emitOutcome(node);
    const d = this.#o.durability;
    // A message's root is saved by its parent agent, with the envelope and the reply (one transaction).
    if (d !== undefined && node.persisted && node.kind !== 'message' && !this.#keepsSaved(node)) {
      d.ended(node, (node.end as FinalEnd).status).catch((error: unknown) => this.#saveFailed(node, error));
    }
    this.table.release(node.id);
    this.#nodes.delete(node.id);
    if (this.#byAgent.get(node.agentId) === node) this.#byAgent.delete(node.agentId);
    const parent = node.parent;
    if (parent === undefined) {
      this.#roots.delete(node);
      this.#streams.delete(node);
      this.#afterChange(node);
      return;
    }
    parent.liveChildren--;
    parent.childUsage = addUsage(parent.childUsage, totalOf(node));
    const result = taskResultOf(node, parent.agent.mergeMetadataFrom.has(node.agent.name));
    const waiter = node.waiter;
    if (waiter !== undefined) {
      // The parent's `task` call awaits it (or did, until the parent's cancel abandoned the call).
      node.waiter = undefined;
      waiter(result);
    } else if (parent.phase === 'suspended' && parent.state !== undefined && node.toolCallId !== undefined) {
      parent.state = resolveDelegatedCall(parent.state, node.toolCallId, result);
      if (node.deferredAt !== undefined) this.#deferredCallStopped(parent, node.toolCallId, node.deferredAt, result);
      this.#reconsider(parent);
    }
    // A parent whose own work is over ends with its last child; a running one picks the
    // result up when it suspends (see #reconsider).
    if (parent.phase === 'draining') this.#maybeEnd(parent);
  }

  /**
   * A suspended node: take what its children and its answers have for it,
   * then resume it if it can go on, end it if it was cancelled, or tell its
   * parent it waits.
   */
  // A deferred task call stops when its child ends (its worker reported no stop for it).
  #deferredCallStopped(node: RunNode, toolCallId: string, since: number, outcome: TaskResult): void {
    if (!this.#has('tool.execute.stop')) return;
    const at = this.#clock.now();
    (this.#events.emit as (name: string, payload: unknown) => boolean)('tool.execute.stop', {
      toolName: TASK_TOOL_NAME,
      toolCallId,
      agentId: node.agentId,
      attempt: 1,
      at,
      durationMs: Math.max(0, at - since),
      status: outcome.status === 'done' ? 'ok' : 'error',
      failure: outcome.status === 'done' ? undefined : 'returned',
      approval: undefined,
      runId: node.id,
      path: node.path,
    });
  }

  #reconsider(node: RunNode): void {
    if (node.phase !== 'suspended') return;
    let state = node.state as LoopState;
    const reason = this.table.reason(node.id);
    if (reason !== undefined) {
      this.#abandon(node, reason);
      return;
    }
    let answer: RequestEntry | undefined;
    for (const call of openCalls(state)) {
      const id = call.call.id;
      if (call.delegated === true) {
        const child = node.childByCall.get(id);
        if (child !== undefined && child.phase === 'ended') {
          // It ended while this run still ran (a deferred call, or a suspended child answered meanwhile).
          const outcome = taskResultOf(child, node.agent.mergeMetadataFrom.has(child.agent.name));
          state = resolveDelegatedCall(state, id, outcome);
          if (child.deferredAt !== undefined) this.#deferredCallStopped(node, id, child.deferredAt, outcome);
        } else if (child === undefined) {
          // A child that did not come back (interrupted by a crash, or never saved): the call fails, the run goes on.
          state = resolveDelegatedCall(state, id, {
            status: 'error',
            error: new TroupeError(
              `the subagent of task call ${id} of ${node.agentId} was interrupted by a restart (its side effects may have happened): check, then delegate again if needed`,
              { code: 'ERR_INTERRUPTED' },
            ),
            events: NO_EVENTS,
          });
        }
        continue;
      }
      let entry = node.requests.get(id);
      // A question the run reported (an approval is opened here, when the handler says ask):
      // what a worker's state claims about approval is never taken.
      if (entry === undefined && call.request !== undefined) entry = this.#open(node, id, call.request, false);
      // The state names the question by the host's id from now on (the answer, and what is saved, carry it).
      if (entry !== undefined) state = renameRequest(state, id, hostRequest(entry));
      if (answer === undefined && entry?.answer !== undefined) answer = entry;
    }
    node.state = state;
    if (answer !== undefined) {
      const taken = answer.answer as NonNullable<RequestEntry['answer']>;
      node.deleteRequest(answer.toolCallId);
      // A yes to an approval runs the call pre-approved only if it is the call the handler was
      // asked about: a worker's state could have put another tool, or other arguments, under its id.
      const approved =
        answer.approval && taken.answer.ok && isApprovedCall(answer.call, pendingCall(state, answer.toolCallId));
      this.#resume(node, {
        answer: taken.answer,
        approvedCalls: approved ? [answer.toolCallId] : [],
        expired: taken.expired,
      });
      return;
    }
    if (openCalls(state).length === 0) {
      this.#resume(node, { answer: undefined, approvedCalls: [], expired: false });
      return;
    }
    // It stays suspended.
    const d = this.#o.durability;
    if (d !== undefined && node.root.conversation !== undefined) {
      const unsaved: RequestEntry[] = [];
      for (const entry of node.requests.values()) {
        if (entry.saved) continue;
        entry.saved = true;
        unsaved.push(entry);
      }
      d.suspended(node, unsaved).catch((error: unknown) => {
        // Not in the store: its answer is taken here (the store cannot take what it never had).
        for (const entry of unsaved) entry.unsaved = true;
        this.#saveFailed(node, error);
      });
    }
    const waiter = node.waiter;
    const first = firstOpenRequest(node);
    // Its parent's call learns of a question; a run that only waits on its children (deferred)
    // keeps its parent's call waiting for its end.
    if (waiter !== undefined && first !== undefined) {
      node.waiter = undefined;
      waiter({ status: 'suspended', request: first.request });
    } else if (first !== undefined && node.parent?.phase === 'suspended') {
      // A parent already suspended (deferred, waiting on this run) learns of the question from here.
      this.#reconsider(node.parent);
    }
    if (first !== undefined && node.kind !== 'message' && this.#has('subagent.suspended')) {
      this.#events.emit('subagent.suspended', {
        agentId: node.agentId,
        runId: node.id,
        parentAgentId: node.parent?.agentId,
        requestId: first?.request.id ?? '',
        path: node.path,
        usage: node.usage,
        totalUsage: totalOf(node),
        threadId: node.thread?.id,
        dispatchedAt: node.dispatchedAt,
        at: this.#clock.now(),
      });
    }
  }

  #resume(
    node: RunNode,
    input: {
      readonly answer: Answer | undefined;
      readonly approvedCalls: readonly string[];
      readonly expired: boolean;
    },
  ): void {
    const state = node.state as LoopState;
    node.state = undefined;
    this.#begin(node);
    node.root.owner?.resumed?.(node.root);
    if (node.kind === 'message') {
      this.#emitRunStarted(node, true);
      void this.#runLocal(node, {
        state,
        answer: input.answer,
        approvedCalls: input.approvedCalls,
        expired: input.expired,
      });
    } else {
      this.#emitSpawned(node, state.metadata, true);
      void this.#runWorker(node, { resume: { state, ...input } });
    }
  }

  // A suspended node that was cancelled: nothing of it runs; it ends cancelled, with its subtree.
  #abandon(node: RunNode, reason: CancelReason): void {
    node.end = { status: 'cancelled', reason, forced: false };
    node.phase = 'draining';
    for (const entry of [...node.requests.values()]) this.#withdraw(entry, `the run was cancelled (${reason})`);
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
   * Run a `task` call of `parent`: a child node, on a worker. Resolves with
   * the child's outcome as the parent's `task` call sees it, or `suspended`
   * as soon as the child waits on a person (its question is open already).
   */
  async runTask(
    parent: RunNode,
    request: {
      readonly subagent: Agent | string;
      readonly instructions: string;
      readonly toolCallId: string;
      readonly metadata: Metadata;
    },
  ): Promise<TaskResult> {
    const name = typeof request.subagent === 'string' ? request.subagent : request.subagent.name;
    const declared = subagentNamed(parent.agent, name);
    if (declared === undefined) {
      return {
        status: 'error',
        error: new TroupeError(`"${name}" is not a subagent of ${parent.agent.name}; declare it in subagents`, {
          code: 'ERR_UNKNOWN_AGENT',
        }),
        events: NO_EVENTS,
      };
    }
    if (parent.childByCall.has(request.toolCallId)) {
      return {
        status: 'error',
        error: new TroupeError(`task call ${request.toolCallId} of ${parent.agentId} already has a child run`, {
          code: 'ERR_PROTOCOL',
        }),
        events: NO_EVENTS,
      };
    }
    if (!this.canQueue()) {
      return {
        status: 'error',
        error: new BackpressureError(
          `the subagent queue is full (${this.#o.maxQueue} runs waiting for a thread): retry later or raise pool.maxQueue`,
          this.#o.maxQueue,
        ),
        events: NO_EVENTS,
      };
    }
    // Numbered in call order, before the child's module may have to load.
    const agentId = subagentId(parent.agentId, ++parent.nextChild);
    // A definition loaded already comes at once: awaiting it would hold back every child of a
    // turn's fan-out until all its calls had reached this line (the threads idle meanwhile).
    let agent: Agent;
    try {
      const found = definitionOf(declared);
      agent = found instanceof Promise ? await found : found;
    } catch (error) {
      return { status: 'error', error: error as Error, events: NO_EVENTS };
    }
    if (parent.phase === 'ended' || parent.phase === 'draining') {
      return {
        status: 'error',
        error: new TroupeError(`${parent.agentId} ended before its task started`, { code: 'ERR_CANCELLED' }),
        events: NO_EVENTS,
      };
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
    // A worker parent that waits on a task call holds its thread. Were every thread held so, no
    // child could ever run (a tree deeper than the pool would deadlock): the call that would make
    // it so is deferred instead — the parent suspends once its turn's other calls are done, gives
    // its thread up, and resumes (on any worker) when the child has ended.
    const worker = parent.kind !== 'message';
    const deferred = worker && this.#blocked.size + (this.#blocked.has(parent) ? 0 : 1) >= this.pool.threads;
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
    this.#emitSpawned(child, request.metadata);
    this.#begin(child);
    void this.#runWorker(child, { input: request.instructions, metadata: request.metadata });
    return result;
  }

  // One task call of a worker run got its reply (or the run ended, with every call: `all`).
  #unblock(node: RunNode, all = false): void {
    if (node.waitingCalls === 0) return;
    node.waitingCalls = all ? 0 : node.waitingCalls - 1;
    if (node.waitingCalls === 0) this.#blocked.delete(node);
  }

  /** The approval handler a node's executor asks: the host's, with its `ask` decisions recorded here. */
  approvalFor(node: RunNode): ApprovalHandler | undefined {
    const handler = this.#o.approval;
    if (handler === undefined) return undefined;
    return async (request) => {
      node.ended ??= new AbortController();
      const ended = node.ended;
      let raw: unknown;
      try {
        raw = await handler(
          { ...request, agentId: node.agentId, parentAgentId: node.parent?.agentId, scope: node.scope },
          { signal: ended.signal },
        );
      } catch (error) {
        return {
          decision: 'reject',
          reason: `the approval handler threw: ${(error as Error)?.message ?? String(error)}`,
        };
      }
      // Cancelled (or ended) while the handler decided: the call stopped waiting for it; a question
      // opened now would be listed for a run that asks nothing.
      if (node.phase !== 'running' || this.table.isCancelled(node.id)) {
        return { decision: 'reject', reason: 'the run was cancelled while the approval handler decided' };
      }
      const decision = ApprovalDecision.safeParse(raw);
      if (decision.success && decision.data.decision === 'ask') {
        const d = decision.data;
        const id = createId('req');
        const local: Request = {
          id,
          kind: 'approval',
          prompt: d.prompt,
          data: d.data ?? { toolName: request.toolName, arguments: request.arguments },
          ...(d.expiresAt === undefined ? {} : { expiresAt: d.expiresAt }),
        };
        this.#open(node, request.toolCallId, local, true, undefined, true, {
          toolName: request.toolName,
          arguments: request.arguments,
        });
        return { ...d, requestId: id };
      }
      // Anything else goes back as it came: the executor denies what is not a decision, and says so.
      return raw as ApprovalDecision;
    };
  }

  // ── Requests ──────────────────────────────────────────────────────────────

  #question(node: RunNode, toolCallId: string, request: Request): void {
    const known = node.requests.get(toolCallId);
    if (known !== undefined && known.local.id === request.id) return;
    this.#open(node, toolCallId, request, false);
  }

  #open(
    node: RunNode,
    toolCallId: string,
    local: Request,
    approval: boolean,
    known?: string,
    announce = true,
    call?: ApprovedCall,
  ): RequestEntry {
    const id = known ?? (approval ? local.id : createId('req'));
    const entry: RequestEntry = {
      id,
      local,
      node,
      toolCallId,
      approval,
      call: approval ? call : undefined,
      openedAt: this.#clock.now(),
      answer: undefined,
      saved: known !== undefined,
    };
    node.setRequest(toolCallId, entry);
    this.#requests.set(id, entry);
    if (announce && this.#has('request.opened')) {
      this.#events.emit('request.opened', {
        request: hostRequest(entry),
        agentId: node.root.agentId,
        runId: node.id,
        path: node.path,
        at: entry.openedAt,
      });
    }
    return entry;
  }

  #withdraw(entry: RequestEntry, why: string): void {
    if (this.#requests.get(entry.id) !== entry) return;
    this.#requests.delete(entry.id);
    entry.node.deleteRequest(entry.toolCallId);
    this.#remember(entry.id, 'withdrawn');
    const d = this.#o.durability;
    // A shutdown keeps what is saved as it is: a new supervisor resumes it.
    if (d !== undefined && entry.saved && !this.#keepsSaved(entry.node)) {
      d.withdraw(entry.node, entry.id).catch((error: unknown) => this.#saveFailed(entry.node, error));
    }
    if (this.#has('request.withdrawn')) {
      this.#events.emit('request.withdrawn', {
        requestId: entry.id,
        agentId: entry.node.root.agentId,
        reason: why,
        at: this.#clock.now(),
      });
    }
  }

  #remember(id: string, how: 'answered' | 'withdrawn'): void {
    this.#closedRequests.set(id, how);
  }

  /** Requests waiting for a person, oldest first. */
  openRequests(): OpenRequest[] {
    const out: OpenRequest[] = [];
    for (const entry of this.#requests.values()) {
      // Answered, or its answer being taken by the store: nobody can answer it any more.
      if (entry.answer !== undefined || entry.taking === true) continue;
      out.push({
        request: hostRequest(entry),
        agentId: entry.node.root.agentId,
        path: entry.node.path,
        openedAt: entry.openedAt,
        runId: entry.node.id,
      });
    }
    return out;
  }

  /** The open request `id`, if any. */
  request(id: string): OpenRequest | undefined {
    const entry = this.#requests.get(id);
    if (entry === undefined || entry.answer !== undefined || entry.taking === true) return undefined;
    return {
      request: hostRequest(entry),
      agentId: entry.node.root.agentId,
      path: entry.node.path,
      openedAt: entry.openedAt,
      runId: entry.node.id,
    };
  }

  /**
   * Take an answer (once) and route it to the run whose tool asked. Returns
   * the root whose tree it resumes; throws a typed error for an unknown,
   * answered or withdrawn request.
   */
  async answer(id: string, answer: Answer): Promise<RunNode> {
    const entry = this.#requests.get(id);
    if (entry !== undefined && entry.answer === undefined && entry.saved && this.#o.durability !== undefined) {
      // Saved: the store takes it, exactly once across processes; meanwhile nobody else here can.
      if (entry.taking) {
        throw new InvalidArgumentError(`request ${id} was already answered: an answer is taken once`, {
          code: 'ERR_REQUEST_ALREADY_ANSWERED',
        });
      }
      entry.taking = true;
      // Counted as running while the store takes it, until the run it resumes is counted itself:
      // a close() that began meanwhile drains it like a running message (and the process stays
      // alive), where it would have found the tree idle and let the resumed run escape it.
      if (this.#running++ === 0) this.#hold();
      try {
        let taken: Awaited<ReturnType<Durability['answer']>>;
        try {
          const root = entry.node.root;
          if (this.#o.beforeAnswer !== undefined && root.active === 0) await this.#o.beforeAnswer(root, id);
          taken = await this.#o.durability.answer(entry.node, id, { ...answer, id });
        } finally {
          entry.taking = false;
        }
        // The store never had it (its opening failed to save): answered here. Otherwise another
        // process took it, or it is gone there.
        const neverSaved = taken.status === 'unknown' && entry.unsaved === true;
        if (taken.status !== 'taken' && !neverSaved)
          this.takenElsewhere(id, taken.status === 'already-answered' ? 'answered' : 'withdrawn');
        else if (this.#requests.get(id) !== entry && this.#closedRequests.get(id) === undefined) {
          // Its agent was stopped (the tree let go of it) while the store took the answer.
          throw new TroupeError(
            `agent ${entry.node.root.agentId} was stopped while the answer to request ${id} was being saved: its run did not resume here; a store that keeps the conversation keeps the answer too (startAgent it again to resume with it)`,
            { code: 'ERR_AGENT_STOPPED' },
          );
        } else if (this.#shutDown) {
          // A shutdown cancelled what ran while the store took it (close()'s deadline, destroy()):
          // nothing resumes after that. The store keeps the answer; a supervisor that restores the
          // conversation resumes its run with it.
          throw new ClosedError(
            `the supervisor shut down while the answer to request ${id} was being saved: its run did not resume here; a store that keeps the conversation keeps the answer too (it resumes when a supervisor on that store restores it)`,
          );
        }
        return this.#deliver(id, answer);
      } finally {
        this.#uncount();
      }
    }
    if (this.#shutDown) {
      throw new ClosedError(`the supervisor shut down: request ${id} was not answered (it stays open)`);
    }
    return this.#deliver(id, answer);
  }

  // The end of something counted in #running that is not a run's own work (an answer being saved).
  #uncount(): void {
    if (--this.#running !== 0) return;
    this.#release();
    if (this.#idle.length > 0) for (const resolve of this.#idle.splice(0)) resolve();
  }

  /**
   * The store says another process answered (or withdrew) the open request
   * `id`: it is not answerable here either, and the root whose tree asked is
   * stale (that process resumed it from what is saved); its owner is told.
   */
  takenElsewhere(id: string, how: 'answered' | 'withdrawn'): void {
    const entry = this.#requests.get(id);
    if (entry === undefined || entry.answer !== undefined) return;
    this.#requests.delete(id);
    entry.node.deleteRequest(entry.toolCallId);
    this.#remember(id, how);
    const root = entry.node.root;
    (root.owner as RootOwner | undefined)?.takenElsewhere?.(root, id);
  }

  /** True while `id` is an open request of this tree (not answered, not withdrawn). */
  hasOpenRequest(id: string): boolean {
    const entry = this.#requests.get(id);
    return entry !== undefined && entry.answer === undefined;
  }

  /**
   * Deliver an answer the store took already (in a process that died before
   * its run resumed): no second compare-and-set.
   */
  redeliver(id: string, answer: Answer): RunNode {
    return this.#deliver(id, answer);
  }

  #deliver(id: string, answer: Answer): RunNode {
    const entry = this.#requests.get(id);
    if (entry === undefined || entry.answer !== undefined) {
      const closed = entry !== undefined ? 'answered' : this.#closedRequests.get(id);
      if (closed === 'answered') {
        throw new InvalidArgumentError(`request ${id} was already answered: an answer is taken once`, {
          code: 'ERR_REQUEST_ALREADY_ANSWERED',
        });
      }
      if (closed === 'withdrawn') {
        throw new InvalidArgumentError(`request ${id} was withdrawn (its run was cancelled or ended)`, {
          code: 'ERR_UNKNOWN_REQUEST',
        });
      }
      throw new InvalidArgumentError(`no pending request ${id}: see pendingRequests()`, {
        code: 'ERR_UNKNOWN_REQUEST',
      });
    }
    const expiresAt = entry.local.expiresAt;
    entry.answer = {
      // The state names it by the host's id (see #reconsider).
      answer: { ...answer, id: entry.id },
      expired: expiresAt !== undefined && this.#clock.now() > expiresAt,
    };
    this.#requests.delete(id);
    this.#remember(id, 'answered');
    const node = entry.node;
    if (this.#has('request.answered')) {
      this.#events.emit('request.answered', {
        requestId: id,
        agentId: node.root.agentId,
        runId: node.id,
        ok: answer.ok,
        at: this.#clock.now(),
      });
    }
    // Suspended: deliver now. Still running (it asked mid-turn): delivered when it suspends.
    if (node.phase === 'suspended') {
      this.#reconsider(node);
      this.#afterChange(node.root);
    }
    return node.root;
  }

  // ── Cancellation ──────────────────────────────────────────────────────────

  /**
   * Cancel a node and its subtree: running runs see it through shared
   * memory at once (the watchdog kills what ignores it after the grace
   * period), suspended ones end cancelled with their questions withdrawn.
   * Returns false when it was over or already cancelled.
   */
  cancel(node: RunNode, reason: CancelReason): boolean {
    if (node.phase === 'ended') return false;
    const changed = this.table.cancel(node.id, reason);
    if (!changed) return false;
    const stack: RunNode[] = [node];
    const suspended: RunNode[] = [];
    for (let n = stack.pop(); n !== undefined; n = stack.pop()) {
      if (n.phase === 'queued' && n.thread === undefined && n.ticket !== undefined) {
        // Still waiting for a thread: it leaves the queue and ends now, without starting.
        this.pool.withdraw(n.ticket);
      } else if (n.thread !== undefined && (n.phase === 'running' || n.phase === 'queued')) {
        this.#watchdog.cancelled(n.id);
      }
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

  #kill(key: string, cause: WatchdogKillCause): void {
    const node = this.#nodes.get(key as RunId);
    const thread = node?.thread;
    if (node === undefined || thread === undefined || node.kill !== undefined) return;
    node.kill = cause;
    this.pool.recycle(
      thread,
      cause.kind === 'lane-timeout'
        ? 'a tool call overran its timeout without yielding'
        : 'its run ignored a cancel past the grace period',
    );
    if (this.#has('worker.recycled')) {
      this.#events.emit('worker.recycled', {
        threadId: thread.id,
        agentId: node.agentId,
        runId: node.id,
        reason: cause.kind === 'lane-timeout' ? 'tool-timeout' : 'cancel-ignored',
        at: this.#clock.now(),
      });
    }
  }

  #recycle(thread: ThreadInfo, reason: string): void {
    if (thread.recycled !== undefined) return;
    this.pool.recycle(thread, reason);
    if (this.#has('worker.recycled')) {
      let agentId: string | undefined;
      let runId: string | undefined;
      for (const node of this.#byCapability.values()) {
        if (node.thread === thread) {
          agentId = node.agentId;
          runId = node.id;
        }
      }
      this.#events.emit('worker.recycled', {
        threadId: thread.id,
        agentId,
        runId,
        reason: 'protocol',
        detail: reason,
        at: this.#clock.now(),
      });
    }
  }

  // ── The host channel's view of runs ───────────────────────────────────────

  #lookup(capability: string, thread: ThreadInfo): HostLookup {
    const node = this.#byCapability.get(capability);
    if (node !== undefined) {
      // Issued, but to another thread: it was stolen.
      if (node.thread !== thread) return { kind: 'unknown' };
      node.talked = true;
      return { kind: 'run', run: this.#hostRun(node) };
    }
    const ended = this.#ended.get(capability);
    // Ended on another thread: this thread never had it (stolen, through something two runs share).
    if (ended !== undefined && ended.thread !== thread) return { kind: 'unknown' };
    if (ended !== undefined) {
      // A call of a run that ended (its result overtook it on another port, or a shutdown ended
      // it) is expected when nothing else runs on its thread; presented while another run is
      // live there, it may be that run reaching for an earlier one's authority: reported.
      let live = false;
      for (const n of this.#byCapability.values()) {
        if (n.thread === thread) {
          live = true;
          break;
        }
      }
      return { kind: 'stale', agentId: ended.agentId, runId: ended.runId, quiet: !live };
    }
    return { kind: 'unknown' };
  }

  #rememberEnded(capability: string, node: RunNode): void {
    this.#ended.set(capability, { agentId: node.agentId, runId: node.id, thread: node.thread });
  }

  // One view per node, made when its host channel first needs it.
  readonly #hostRuns = new WeakMap<RunNode, HostRun>();

  #hostRun(node: RunNode): HostRun {
    let run = this.#hostRuns.get(node);
    if (run !== undefined) return run;
    const approval = this.approvalFor(node);
    run = {
      agentId: node.agentId,
      runId: node.id,
      approve: (request) => {
        if (approval === undefined) return Promise.resolve({ decision: 'reject', reason: NO_APPROVAL_HANDLER });
        node.ended ??= new AbortController();
        const ended = node.ended;
        return Promise.resolve(
          approval(
            {
              toolName: request.toolName,
              toolCallId: request.toolCallId as ToolCallId,
              arguments: request.arguments,
              agentId: node.agentId,
              parentAgentId: node.parent?.agentId,
            },
            { signal: ended.signal },
          ),
        );
      },
      task: async (request) => {
        const result = await this.runTask(node, request);
        // A cancelled run's worker stopped waiting (its call lost the race with the cancel).
        if (this.table.isCancelled(node.id) || node.phase !== 'running') return undefined;
        return encodeTaskResult(result);
      },
      events: (events) => this.#workerEvents(node, events),
      checkpoint: async (p: HostCheckpoint) => {
        const d = this.#o.durability;
        // Offered only with a durable store; a worker asking without one gets nothing saved.
        if (d === undefined || !d.durable) return true;
        if (p.phase === 'before') await d.beforeCalls(node, p.state as unknown as LoopState, p.calls);
        else
          await d.afterTurn(
            node,
            p.state as unknown as LoopState,
            p.calls.map((c) => c.id),
          );
        return true;
      },
      holding: (raw) => {
        const parsed = decodeSubagentResult(raw);
        if (parsed.error !== undefined) return parsed.error;
        this.#countEvent(node);
        node.held = heldEnd(parsed.result);
        // The run is over; its thread is not free until the work it left settles.
        this.#watchdog.cancelled(node.id);
        return undefined;
      },
    };
    this.#hostRuns.set(node, run);
    return run;
  }

  // The killed worker could not report the end of its call: report it for it, as
  // the executor would have (timeout, then stop), when someone listens.
  #reportKilledCall(node: RunNode, error: Error): void {
    const start = node.lastToolStart;
    const toolName = (error as { toolName?: unknown }).toolName;
    if (start === undefined || start.toolName !== toolName) return;
    const at = this.#clock.now();
    const timeoutMs = (error as { timeoutMs?: number }).timeoutMs ?? 0;
    const ids = { agentId: node.agentId, runId: node.id, path: node.path };
    if (this.#has('tool.execute.timeout')) {
      this.#events.emit('tool.execute.timeout', { ...(start as object), ...ids, timeoutMs, at } as never);
    }
    if (this.#has('tool.execute.stop')) {
      const started = typeof start.at === 'number' ? start.at : at;
      this.#events.emit('tool.execute.stop', {
        ...(start as object),
        ...ids,
        durationMs: at - started,
        status: 'error',
        failure: 'timeout',
        at,
      } as never);
    }
  }

  #countEvent(node: RunNode): void {
    node.received++;
    const expect = node.expect;
    if (expect !== undefined && node.received >= expect.sent) {
      node.expect = undefined;
      if (node.expectTimer !== undefined) this.#clock.clearTimeout(node.expectTimer);
      expect.resolve();
    }
  }

  // A result's tail of events: telemetry and deltas only (a worker posts a question at once, never
  // in a tail), at most MAX_TAIL_DELTAS deltas; anything else drops the tail (telemetry is best-effort).
  #workerTail(node: RunNode, tail: readonly unknown[]): void {
    const events = parseHostEvents(tail);
    if (typeof events === 'string') return;
    let deltas = 0;
    for (const e of events) {
      if (e[0] === 'q') return;
      if (e[0] !== 'd') continue;
      deltas += e[1].length;
      if (deltas > MAX_TAIL_DELTAS) return;
    }
    for (const e of events) {
      if (e[0] === 't') this.#telemetry(node, e[1], e[2]);
      else if (e[0] === 'd') this.#deltas(node, e[1]);
    }
  }

  #workerEvents(node: RunNode, events: readonly HostEvent[]): void {
    for (const e of events) {
      switch (e[0]) {
        case 't':
          this.#telemetry(node, e[1], e[2]);
          break;
        case 'd':
          this.#deltas(node, e[1]);
          break;
        case 'q':
          this.#question(node, e[1], e[2]);
          break;
      }
    }
    this.#countEvent(node);
  }

  // A worker's telemetry event, re-emitted with the ids of the run its capability names (never its own claims).
  #telemetry(node: RunNode, name: string, raw: Record<string, unknown>): void {
    if (!TELEMETRY_EVENTS.has(name)) return;
    const event = name as keyof SupervisorEvents;
    if (this.#events.listenerCount(event) === 0 && name !== 'tool.execute.start') return;
    // The run's ids win over the worker's keys. They are placed before the spread and set again after
    // it, not added after it: on Node 20 (V8 11.3) a literal that adds keys after a spread takes a
    // slow path (1–2 µs an event, against 0.15 µs). The spread defines keys as own data properties,
    // so a worker's `__proto__` key stays a key (an `Object.assign` would set the prototype).
    const payload: Record<string, unknown> = { agentId: node.agentId, runId: node.id, path: node.path, ...raw };
    payload.agentId = node.agentId;
    payload.runId = node.id;
    payload.path = node.path;
    if (typeof payload.at !== 'number') payload.at = this.#clock.now();
    if (name === 'tool.execute.start') node.lastToolStart = payload;
    if (name === 'tool.execute.exception') payload.reason = decodeShape(payload.reason);
    else if (name === 'model.error') payload.error = decodeShape(payload.error);
    (this.#events.emit as (n: string, p: unknown) => boolean)(event, payload);
  }

  #deltas(node: RunNode, deltas: readonly ModelDelta[]): void {
    if (this.#has('model.delta')) {
      this.#events.emit('model.delta', {
        agentId: node.agentId,
        runId: node.id,
        path: node.path,
        deltas,
        at: this.#clock.now(),
      });
    }
    const listeners = this.#streams.get(node.root);
    if (listeners !== undefined) for (const listener of listeners) listener(node, deltas);
  }

  // Whether anyone listens to a worker's telemetry: asked on every dispatch, recomputed
  // only when the listeners changed (the supervisor counts changes).
  // Whether anyone listens to a loop or tool event.
  #observed(): boolean {
    return this.#telemetryBits() !== 0;
  }

  // What a worker run is told to forward: 0 when nobody listens to any loop or
  // tool event, else the telemetry feature and a bit per event with a listener
  // (a tool's start too when its stop or timeout is listened to: the
  // supervisor reports a killed call from it). Cached per listener version.
  #telemetryBits(): number {
    const version = this.#o.listenersVersion?.() ?? -1;
    if (version !== -1 && version === this.#bitsVersion) return this.#bitsCache;
    let bits = 0;
    for (const name of TELEMETRY_EVENTS) {
      if (this.#events.listenerCount(name as keyof SupervisorEvents) > 0) bits |= telemetryBit(name);
    }
    if (this.#events.listenerCount('tool.execute.stop') > 0 || this.#events.listenerCount('tool.execute.timeout') > 0) {
      bits |= telemetryBit('tool.execute.start');
    }
    if (bits !== 0) bits |= HostFeature.telemetry;
    this.#bitsVersion = version;
    this.#bitsCache = bits;
    return bits;
  }
  #bitsVersion = -2;
  #bitsCache = 0;

  // Whether anyone listens to `name`: per-run checks read a cache the listener version invalidates.
  #has(name: keyof SupervisorEvents): boolean {
    const version = this.#o.listenersVersion?.() ?? -1;
    if (version === -1) return this.#events.listenerCount(name) > 0;
    if (version !== this.#hasVersion) {
      this.#hasVersion = version;
      this.#hasCache.clear();
    }
    let known = this.#hasCache.get(name);
    if (known === undefined) {
      known = this.#events.listenerCount(name) > 0;
      this.#hasCache.set(name, known);
    }
    return known;
  }
  #hasVersion = -2;
  readonly #hasCache = new Map<string, boolean>();

  #streamed(node: RunNode): boolean {
    return this.#streams.has(node.root) || this.#has('model.delta');
  }

  // The loop's events for a run on this thread: the supervisor's emitter, with the run's ids added.
  #sink(node: RunNode): LoopEventSink | undefined {
    if (!this.#observed()) return undefined;
    const events = this.#events;
    return {
      listenerCount: (name) => events.listenerCount(name as keyof SupervisorEvents),
      emit: (name, ...args) => {
        // The run's ids win; set after the spread rather than added in the literal (see #telemetry).
        const payload: Record<string, unknown> = { runId: node.id, path: node.path, ...args[0] };
        payload.runId = node.id;
        payload.path = node.path;
        return (events.emit as (n: string, p: unknown) => boolean)(name, payload);
      },
    };
  }

  // ── Events ────────────────────────────────────────────────────────────────

  #emitSpawned(node: RunNode, metadata: Metadata | undefined, resumed = false): void {
    if (!this.#has('subagent.spawned')) return;
    const bytes = channelBytes(node.scope, node.toolContext, metadata);
    this.#events.emit('subagent.spawned', {
      agentId: node.agentId,
      runId: node.id,
      parentAgentId: node.parent?.agentId,
      agent: node.agent.name,
      resumed,
      path: node.path,
      bytes,
      toolCallId: node.toolCallId,
      model: node.agent.model.name,
      provider: node.agent.model.provider,
      at: this.#clock.now(),
    });
  }

  // A parent message's run starts (synchronously in the call that started it: listeners see its async context).
  #emitRunStarted(node: RunNode, resumed: boolean): void {
    if (!this.#has('agent.run.started')) return;
    const model = node.agent.model;
    this.#events.emit('agent.run.started', {
      agentId: node.agentId,
      runId: node.id,
      path: node.path,
      agent: node.agent.name,
      resumed,
      model: model.name,
      provider: model.provider,
      at: this.#clock.now(),
    });
  }

  #emitOutcome(node: RunNode): void {
    if (node.kind === 'message') return; // a parent agent's message is reported by its owner
    const end = node.end as FinalEnd;
    const events = this.#events;
    if (!this.#has(OUTCOME_EVENTS[end.status])) return;
    // Each payload is one literal (no `{ ...base, turns }`: slow on Node 20, see #telemetry).
    const agentId = node.agentId;
    const runId = node.id;
    const parentAgentId = node.parent?.agentId;
    const path = node.path;
    const usage = node.usage;
    const totalUsage = totalOf(node);
    const threadId = node.thread?.id;
    const dispatchedAt = node.dispatchedAt;
    const at = this.#clock.now();
    switch (end.status) {
      case 'done':
        if (this.#has('subagent.done')) {
          events.emit('subagent.done', {
            agentId,
            runId,
            parentAgentId,
            path,
            usage,
            totalUsage,
            threadId,
            dispatchedAt,
            at,
            turns: end.turns,
          });
        }
        break;
      case 'failed':
        if (this.#has('subagent.failed')) {
          events.emit('subagent.failed', {
            agentId,
            runId,
            parentAgentId,
            path,
            usage,
            totalUsage,
            threadId,
            dispatchedAt,
            at,
            error: end.error,
          });
        }
        break;
      case 'crashed':
        if (this.#has('subagent.crashed')) {
          events.emit('subagent.crashed', {
            agentId,
            runId,
            parentAgentId,
            path,
            usage,
            totalUsage,
            threadId,
            dispatchedAt,
            at,
            exitCode: end.exitCode,
            error: end.error,
          });
        }
        break;
      case 'cancelled':
        if (this.#has('subagent.cancelled')) {
          events.emit('subagent.cancelled', {
            agentId,
            runId,
            parentAgentId,
            path,
            usage,
            totalUsage,
            threadId,
            dispatchedAt,
            at,
            reason: end.reason,
            forced: end.forced,
          });
        }
        break;
      case 'incomplete':
        if (this.#has('subagent.incomplete')) {
          events.emit('subagent.incomplete', {
            agentId,
            runId,
            parentAgentId,
            path,
            usage,
            totalUsage,
            threadId,
            dispatchedAt,
            at,
            turns: end.turns,
          });
        }
        break;
    }
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
    completed: number;
    refused: number;
    suspendedBelowRoots: number;
  } {
    let suspended = 0;
    // Waiting on a person somewhere below: a run deferred while its child runs is not.
    for (const node of this.#nodes.values())
      if (node.parent !== undefined && node.phase === 'suspended' && firstOpenRequest(node) !== undefined) suspended++;
    return {
      runs: this.#nodes.size,
      running: this.#running,
      requests: this.#requests.size,
      completed: this.#completed,
      refused: this.#host.refusals,
      suspendedBelowRoots: suspended,
    };
  }

  /** Whether one more worker run may wait for a thread (`pool.maxQueue`). */
  canQueue(): boolean {
    return this.pool.queued < this.#o.maxQueue || this.#workerRuns < this.pool.size;
  }

  /** Stop the watchdog and every thread once nothing runs. */
  async closeTransport(): Promise<void> {
    this.#watchdog.close();
    await this.pool.close();
    this.table.slots.wakeWatchers();
    this.#stopKeepAlive();
  }

  /** Terminate every thread now. */
  async destroyTransport(): Promise<void> {
    this.#watchdog.close();
    await this.pool.destroy();
    this.table.slots.wakeWatchers();
    this.#stopKeepAlive();
  }
}

function endOfLoop(outcome: LoopOutcome): RunEnd {
  const state = outcome.state;
  switch (outcome.status) {
    case 'done':
      return { status: 'done', text: outcome.text, updates: state.updates, events: state.events, turns: state.turns };
    case 'failed':
      return { status: 'failed', error: outcome.error, events: state.events, turns: state.turns };
    case 'incomplete':
      return { status: 'incomplete', events: state.events, turns: state.turns };
    case 'cancelled':
      return { status: 'cancelled', reason: outcome.reason, forced: false };
    case 'suspended':
      return { status: 'suspended', state, events: state.events, turns: state.turns };
  }
}

function heldEnd(result: SubagentResult): WorkerEnd {
  const usage = result.usage ?? NO_USAGE;
  const events = result.events ?? NO_EVENTS;
  const sent = result.sent ?? 0;
  switch (result.status) {
    case 'done':
      return {
        usage,
        sent,
        end: { status: 'done', text: result.text, updates: result.updates ?? [], events, turns: result.turns },
      };
    case 'failed':
      return { usage, sent, end: { status: 'failed', error: decodeError(result.error), events, turns: result.turns } };
    case 'incomplete':
      return { usage, sent, end: { status: 'incomplete', events, turns: result.turns } };
    case 'cancelled':
      return { usage, sent, end: { status: 'cancelled', reason: result.reason, forced: true } };
    case 'suspended':
      return { usage, sent, end: { status: 'suspended', state: result.state, events, turns: result.turns } };
  }
}

function decodeShape(value: unknown): unknown {
  if (typeof value !== 'object' || value === null) return value;
  try {
    return decodeError(value as never);
  } catch {
    return value;
  }
}

/** A task result for the worker that asked (errors as shapes). */
function encodeTaskResult(result: TaskResult): import('@troupe/core/internal').HostTaskResult {
  switch (result.status) {
    case 'done':
      return {
        status: 'done',
        result: result.result,
        events: [...result.events],
        ...(result.updates === undefined ? {} : { updates: [...result.updates] }),
        ...(result.usage === undefined ? {} : { usage: result.usage }),
      };
    case 'suspended':
      return { status: 'suspended', request: result.request };
    case 'error':
      return {
        status: 'error',
        error: encodeError(result.error),
        events: [...result.events],
        ...(result.usage === undefined ? {} : { usage: result.usage }),
      };
  }
}

function channelBytes(
  scope: unknown,
  toolContext: Readonly<Record<string, unknown>>,
  metadata: Metadata | undefined,
): { scope: number; toolContext: number; metadata: number; total: number } {
  const s = sizeOf(scope);
  const t = sizeOf(toolContext);
  const m = sizeOf(metadata ?? EMPTY);
  return { scope: s, toolContext: t, metadata: m, total: s + t + m };
}

// The size of a frozen value is measured once (a scope, a toolContext, a metadata snapshot are
// frozen, and every spawn of a fan-out carries the same ones).
const sizes = new WeakMap<object, number>();

function sizeOf(value: unknown): number {
  const cacheable = typeof value === 'object' && value !== null && Object.isFrozen(value);
  if (cacheable) {
    const known = sizes.get(value);
    if (known !== undefined) return known;
  }
  let size: number;
  try {
    size = serializedSize(value);
  } catch {
    size = 0;
  }
  if (cacheable) sizes.set(value, size);
  return size;
}

/** Deltas a result's tail may carry (a worker batches at most 64 per message it posts). */
const MAX_TAIL_DELTAS = 4096;

/** The request kind of a deferred task call (its child waits for a thread; nobody is asked anything). */

// `<parent>-sub-<n>` → n (0 when the id is not one).
function childNumber(agentId: string): number {
  const at = agentId.lastIndexOf('-sub-');
  const n = at < 0 ? 0 : Number(agentId.slice(at + 5));
  return Number.isSafeInteger(n) ? n : 0;
}

// An agent's subagents by name, indexed once per agent.
const subagentIndex = new WeakMap<Agent, ReadonlyMap<string, Agent>>();

function subagentNamed(agent: Agent, name: string): Agent | undefined {
  let index = subagentIndex.get(agent);
  if (index === undefined) {
    index = new Map(agent.subagents.map((a) => [a.name, a]));
    subagentIndex.set(agent, index);
  }
  return index.get(name);
}

/**
 * The definition of a saved run's agent: `name` among `parent`'s subagents,
 * as its own module exports it; `undefined` when the parent has none by that name.
 */
export async function restoredDefinition(parent: Agent, name: string): Promise<Agent | undefined> {
  const declared = subagentNamed(parent, name);
  return declared === undefined ? undefined : definitionOf(declared);
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

/**
 * An agent's definition as its own module exports it (its declared subagents matter for nested
 * tasks): at once when this thread has loaded it, else once its module is imported. An agent of
 * the entry script is taken as given: that module is this program, still running (see
 * isEntryModule). Throws at once without a module.
 */
export function definitionOf(agent: Agent): Agent | Promise<Agent> {
  if (agent.module === undefined) {
    throw new InvalidArgumentError(
      `agent "${agent.name}" has no module URL, so a worker cannot load it: define it with module: import.meta.url`,
      { code: 'ERR_UNKNOWN_AGENT' },
    );
  }
  const loaded = loadedAgent(agent.module, agent.name);
  if (loaded !== undefined) return loaded;
  return isEntryModule(agent.module) ? agent : importDefinition(agent.module, agent.name);
}

async function importDefinition(module: string, name: string): Promise<Agent> {
  try {
    return await loadAgent(module, name);
  } catch (error) {
    if (isTroupeError(error))
      throw new InvalidArgumentError(error.message, { code: 'ERR_UNKNOWN_AGENT', cause: error });
    throw error;
  }
}

// The pending call of `state` under `toolCallId`, if any.
function pendingCall(
  state: LoopState,
  toolCallId: string,
): { readonly name: string; readonly arguments?: unknown } | undefined {
  return state.pending?.find((p) => p.call.id === toolCallId)?.call;
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
