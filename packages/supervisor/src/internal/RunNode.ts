import {
  type Agent,
  type AgentId,
  type Answer,
  addUsage,
  CancelledError,
  type CancelReason,
  type LoopState,
  NO_USAGE,
  type Request,
  type RunId,
  type Scope,
  type TaskResult,
  TroupeError,
  type Usage,
} from '@troupe/core';
import type { AttemptHandle, AttemptWork, RunEnd } from '../RunTransport.js';

/** What kind of run a node is. */
export type RunKind = 'message' | 'subagent' | 'spawn';

/** A {@link RunEnd} that is final. */
export type FinalEnd = Exclude<RunEnd, { readonly status: 'suspended' | 'lost' }>;

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

/**
 * One run of the tree: its identity (set when it is made) and its record.
 * The record is written by `RunTree` only; every other module reads it (a
 * transport keeps its own record of an attempt, the store returns what it
 * saved, the requests keep their own map). A class with every field set in
 * the constructor (one hidden class: this is made per spawn), its children
 * made on first use.
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
  /** Its task calls waiting on their children right now (a worker run holds its thread meanwhile). */
  waitingCalls = 0;
  /** When its parent's `task` call was deferred for it (the call's stop is reported when it ends). */
  deferredAt: number | undefined = undefined;
  phase: RunPhase = 'queued';
  /** The state it is suspended in, or to resume from. */
  state: LoopState | undefined = undefined;
  /** Its own work's final end (draining, ended). */
  end: FinalEnd | undefined = undefined;
  /** Why it was cancelled (its whole subtree is too); `undefined` while it is not. */
  cancelled: CancelReason | undefined = undefined;
  /** When its current (re)dispatch must have ended (clock ms), if ever. */
  deadline: number | undefined = undefined;
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
  /** Its current attempt on the transport, while it waits for a slot or runs in one. */
  handle: AttemptHandle | undefined = undefined;
  /** The thread its current attempt runs on, and when a slot took it (telemetry: the end of its queue wait). */
  threadId: number | undefined = undefined;
  /** The worker host of that thread, when a remote transport runs it (`AttemptPlacement.host`). */
  host: string | undefined = undefined;
  dispatchedAt: number | undefined = undefined;
  /** Incremented on every (re)dispatch: a fencing token for what is saved of it. */
  attempt = 0;
  /**
   * What its current dispatch is run again with if it is lost (a durable store only: its tools
   * start after a checkpoint): the work it was dispatched with, then its last checkpointed turn.
   */
  rerun: AttemptWork | undefined = undefined;
  /** Attempts of it that were lost so far (each is run again from its checkpoint, up to a bound). */
  lost = 0;
  /** Roots only: nodes of the tree queued or running. */
  active = 0;
  /** Roots only: callers waiting for the tree to be quiet. */
  quiet: ((reply: unknown) => void)[] | undefined = undefined;
  /** Roots only: its end was reported to its owner. */
  reported = false;
  #children: Map<string, RunNode> | undefined = undefined;
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
      // Its keys in the order the worker's copy of it is written (see RunAttempt's encodeTaskResult).
      return end.output === undefined
        ? { status: 'done', result: end.text, events: end.events, updates: merge ? end.updates : undefined, usage }
        : {
            status: 'done',
            result: end.text,
            output: end.output,
            events: end.events,
            updates: merge ? end.updates : undefined,
            usage,
          };
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
