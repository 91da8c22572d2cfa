import {
  type Agent,
  type AgentId,
  type Answer,
  addUsage,
  CancelledError,
  type CancelReason,
  type LoopState,
  NO_USAGE,
  type Operation,
  type Request,
  type RunId,
  type Scope,
  type SessionEvent,
  type TaskResult,
  TroupeError,
  type Usage,
  type WorkerCrashedError,
} from '@troupe/core';
import { openCalls } from '@troupe/core/internal';
import type { WatchdogKillCause } from '../Watchdog.js';
import type { ThreadInfo } from './WorkerPool.js';

/** What kind of run a node is. */
export type RunKind = 'message' | 'subagent' | 'spawn';

/**
 * How a run's own work ended (its subtree may still be ending): one shape
 * for every kind of run, on the supervisor's side of the wire.
 */
export type RunEnd =
  | {
      readonly status: 'done';
      readonly text: string;
      readonly updates: readonly Operation[];
      readonly events: readonly SessionEvent[];
      readonly turns: number;
    }
  | {
      readonly status: 'failed';
      readonly error: Error;
      readonly events: readonly SessionEvent[];
      readonly turns: number;
    }
  | { readonly status: 'incomplete'; readonly events: readonly SessionEvent[]; readonly turns: number }
  | { readonly status: 'cancelled'; readonly reason: CancelReason; readonly forced: boolean }
  | { readonly status: 'crashed'; readonly error: WorkerCrashedError; readonly exitCode: number | null }
  | {
      readonly status: 'suspended';
      readonly state: LoopState;
      readonly events: readonly SessionEvent[];
      readonly turns: number;
    };

/** A {@link RunEnd} that is final. */
export type FinalEnd = Exclude<RunEnd, { readonly status: 'suspended' }>;

/**
 * Where a node is in its life:
 * - `queued`: waiting for a worker thread;
 * - `running`: its loop runs (here, or on a worker);
 * - `suspended`: its loop stopped on open calls (questions, suspended children); nothing runs for it;
 * - `draining`: its own work ended, some of its children have not;
 * - `ended`: it and its whole subtree are over (terminal, exactly once).
 */
export type RunPhase = 'queued' | 'running' | 'suspended' | 'draining' | 'ended';

/** The tool call an approval question is about (see {@link RequestEntry.call}). */
export interface ApprovedCall {
  readonly toolName: string;
  readonly arguments: unknown;
}

/** A question a run asked, as the supervisor tracks it until it is answered or withdrawn. */
export interface RequestEntry {
  /** The id the host sees: minted here, unique per supervisor. */
  readonly id: string;
  /** The request as the asking tool wrote it (its own id included). */
  readonly local: Request;
  readonly node: RunNode;
  readonly toolCallId: string;
  /** An approval question (`ask` from the approval handler): only a yes runs the call, pre-approved. */
  readonly approval: boolean;
  /**
   * For an approval: the call the handler was asked about. Only that call — the same tool,
   * the same arguments — runs pre-approved on a yes, whatever the run's state says later.
   */
  readonly call?: ApprovedCall | undefined;
  readonly openedAt: number;
  /** Taken answer, waiting for the run to be suspended so it can be delivered. */
  answer: { readonly answer: Answer; readonly expired: boolean } | undefined;
  /** Saved in the store (opened there): its answer is then taken there, once, across processes. */
  saved: boolean;
  /** An answer is being taken in the store right now. */
  taking?: boolean;
  /** Its opening could not be saved (`persistence.failed`): answered in this process only. */
  unsaved?: boolean;
}

/**
 * The conversation a root run is saved with: one object per agent, kept for
 * its life. `revision` is its saved envelope's (as loaded, counted up by each
 * envelope the agent commits): every save is based on it, so a store refuses a
 * stale copy (`ERR_STORE_FENCED`); `undefined` when the store does not fence.
 */
export interface SavedConversation {
  readonly agentId: string;
  readonly conversationId: string;
  revision: number | undefined;
}

/** The caller that owns a root run and turns its settled state into a reply. */
export interface RootOwner {
  /**
   * The root's tree is quiet (nothing runs): report it; the reply every
   * waiter gets, or a promise of it (an owner that saves first).
   */
  settle(root: RunNode): unknown;
  /** The root runs again (an answer resumed part of its tree). */
  resumed?(root: RunNode): void;
  /**
   * Another process took the answer to `requestId`, a question of the root's
   * tree (or withdrew it): that process resumed what is saved, so this copy
   * of the tree is stale. The request is already gone from the tree.
   */
  takenElsewhere?(root: RunNode, requestId: string): void;
}

/** What a node is made from. */
export interface RunNodeInit {
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
  /** Roots only: the conversation whose rows it is saved with (none: not saved). */
  readonly conversation?: SavedConversation | undefined;
}

const NO_CHILDREN: ReadonlyMap<string, RunNode> = new Map();
const NO_REQUESTS: ReadonlyMap<string, RequestEntry> = new Map();

/**
 * One run of the tree. Owned by `RunTree`; other modules read it. A class
 * with every field set in the constructor (one hidden class: this is made
 * per spawn), its collections made on first use.
 */
export class RunNode {
  readonly id: RunId;
  readonly agentId: AgentId;
  readonly kind: RunKind;
  /** The agent as the supervisor knows it (for a subagent: as its own module exports it). */
  readonly agent: Agent;
  readonly parent: RunNode | undefined;
  readonly root: RunNode;
  /** The parent's `task` call that spawned it. */
  readonly toolCallId: string | undefined;
  readonly scope: Scope;
  readonly toolContext: Readonly<Record<string, unknown>>;
  /** Relative deadline of each of its (re)dispatches. */
  readonly timeoutMs: number | undefined;
  readonly owner: RootOwner | undefined;
  /** Roots only: the conversation whose rows it is saved with (none: not saved). */
  readonly conversation: SavedConversation | undefined;
  /** A row of it was saved (so its end is saved too). */
  persisted = false;
  /** Its task calls waiting on their children right now (a worker run holds its thread meanwhile). */
  waitingCalls = 0;
  /** When its parent's `task` call was deferred for it (the call's stop is reported when it ends). */
  deferredAt: number | undefined = undefined;
  phase: RunPhase = 'queued';
  /** The state it is suspended in, or to resume from. */
  state: LoopState | undefined = undefined;
  /** Its own work's final end (draining, ended). */
  end: FinalEnd | undefined = undefined;
  /** Children not yet ended. */
  liveChildren = 0;
  /** The number of the next child (`<agentId>-sub-<n>`); never reused, even across suspensions. */
  nextChild = 0;
  /** Tokens of its own model calls. */
  usage: Usage = NO_USAGE;
  /** Tokens of its ended children's subtrees. */
  childUsage: Usage = NO_USAGE;
  /** The parent's `task` call, while it awaits this run. */
  waiter: ((result: TaskResult) => void) | undefined = undefined;
  /** Its current dispatch: the capability its host calls present and the thread it was sent to. */
  capability: string | undefined = undefined;
  thread: ThreadInfo | undefined = undefined;
  /** When its current dispatch was handed to `thread` (telemetry: the end of its queue wait). */
  dispatchedAt: number | undefined = undefined;
  /** Incremented on every (re)dispatch: a fencing token for what is saved of it. */
  attempt = 0;
  /** Its current dispatch, while it waits for or runs on a thread (to withdraw it from the queue). */
  ticket: import('./WorkerPool.js').DispatchTicket | undefined = undefined;
  /** Why the watchdog had its thread killed, if it did. */
  kill: WatchdogKillCause | undefined = undefined;
  /** Event batches of its current dispatch read so far. */
  received = 0;
  /** Its current dispatch presented its capability on the host channel. */
  talked = false;
  /** Its result, held until `sent` batches were read (see `SubagentResult.sent`). */
  expect: { readonly sent: number; readonly resolve: () => void } | undefined = undefined;
  expectTimer: unknown = undefined;
  /** The last `tool.execute.start` its worker reported (to close that call if the worker is killed). */
  lastToolStart: Readonly<Record<string, unknown>> | undefined = undefined;
  /** The result a worker handed over while it held work of the ended run. */
  held: import('./Dispatcher.js').WorkerEnd | undefined = undefined;
  /** Aborted when its own work ends (an approval handler stops asking). */
  ended: AbortController | undefined = undefined;
  /** Roots only: nodes of the tree queued or running. */
  active = 0;
  /** Roots only: callers waiting for the tree to be quiet. */
  quiet: ((reply: unknown) => void)[] | undefined = undefined;
  /** Roots only: its end was reported to its owner. */
  reported = false;
  #children: Map<string, RunNode> | undefined = undefined;
  #requests: Map<string, RequestEntry> | undefined = undefined;
  #path: readonly AgentId[] | undefined = undefined;

  constructor(init: RunNodeInit) {
    this.id = init.id;
    this.agentId = init.agentId;
    this.kind = init.kind;
    this.agent = init.agent;
    this.parent = init.parent;
    this.root = init.parent === undefined ? this : init.parent.root;
    this.toolCallId = init.toolCallId;
    this.scope = init.scope;
    this.toolContext = init.toolContext;
    this.timeoutMs = init.timeoutMs;
    this.owner = init.owner;
    this.conversation = init.conversation;
    if (init.parent !== undefined && init.toolCallId !== undefined) init.parent.#adopt(init.toolCallId, this);
  }

  #adopt(toolCallId: string, child: RunNode): void {
    this.#children ??= new Map();
    this.#children.set(toolCallId, child);
    this.liveChildren++;
  }

  /** Agent ids from the root down to this run (made on first read). */
  get path(): readonly AgentId[] {
    this.#path ??= this.parent === undefined ? [this.agentId] : [...this.parent.path, this.agentId];
    return this.#path;
  }

  /** Its children by the `task` call that spawned them, ended ones included. */
  get childByCall(): ReadonlyMap<string, RunNode> {
    return this.#children ?? NO_CHILDREN;
  }

  /** Its own open questions, by the tool call that asked. */
  get requests(): ReadonlyMap<string, RequestEntry> {
    return this.#requests ?? NO_REQUESTS;
  }

  setRequest(toolCallId: string, entry: RequestEntry): void {
    this.#requests ??= new Map();
    this.#requests.set(toolCallId, entry);
  }

  deleteRequest(toolCallId: string): void {
    this.#requests?.delete(toolCallId);
  }

  clearRequests(): void {
    this.#requests?.clear();
  }
}

/** Usage of a node's whole subtree so far (its own when it has no children's: no new object). */
export function totalOf(node: RunNode): Usage {
  let total = node.childUsage === NO_USAGE ? node.usage : addUsage(node.usage, node.childUsage);
  // Children still alive (suspended, or running while this one reports) count with what they used so far.
  if (node.liveChildren > 0) {
    for (const child of node.childByCall.values()) if (child.phase !== 'ended') total = addUsage(total, totalOf(child));
  }
  return total;
}

// A cancel reaches a whole subtree at once: its errors are made without a stack
// (nothing to learn from one, and capturing it is most of an error's cost).
function cancelledError(child: RunNode, reason: CancelReason): Error {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return new CancelledError(reason, `subagent ${child.agentId} was cancelled (${reason})`);
  } finally {
    Error.stackTraceLimit = limit;
  }
}

/** What a parent's `task` call gets for a child that ended. */
export function taskResultOf(child: RunNode, merge: boolean): TaskResult {
  const end = child.end as FinalEnd;
  const usage = totalOf(child);
  switch (end.status) {
    case 'done':
      return { status: 'done', result: end.text, updates: merge ? end.updates : undefined, events: end.events, usage };
    case 'failed':
      return { status: 'error', error: end.error, events: end.events, usage };
    case 'crashed':
      return { status: 'error', error: end.error, events: [], usage };
    case 'cancelled':
      return { status: 'error', error: cancelledError(child, end.reason), events: [], usage };
    case 'incomplete':
      return {
        status: 'error',
        error: new TroupeError(
          `subagent ${child.agentId} reached its turn limit (${end.turns} turns) without an answer: give it a narrower task or raise its maxTurns`,
          { code: 'ERR_INCOMPLETE' },
        ),
        events: end.events,
        usage,
      };
  }
}

/** The host's view of a request: the supervisor's id, the rest as the tool wrote it. */
export function hostRequest(entry: RequestEntry): Request {
  return entry.local.id === entry.id ? entry.local : { ...entry.local, id: entry.id };
}

/**
 * The first question open anywhere in a suspended node's subtree, in call
 * order, depth first: what a reply that says `suspended` names.
 */
export function firstOpenRequest(node: RunNode): { request: Request; path: readonly AgentId[] } | undefined {
  const state = node.state;
  if (state === undefined) return undefined;
  for (const call of openCalls(state)) {
    if (call.delegated === true) {
      const child = node.childByCall.get(call.call.id);
      if (child !== undefined && child.phase === 'suspended') {
        const found = firstOpenRequest(child);
        if (found !== undefined) return found;
      }
      continue;
    }
    const entry = node.requests.get(call.call.id);
    if (entry !== undefined && entry.answer === undefined) return { request: hostRequest(entry), path: node.path };
  }
  return undefined;
}
