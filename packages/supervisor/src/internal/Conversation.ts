import {
  type AgentId,
  addUsage,
  type Clock,
  type LoopState,
  NO_USAGE,
  type Request,
  subtractUsage,
  TroupeError,
  totalUsage,
  type Usage,
  usageEquals,
} from '@troupe/core';
import { sealMessage } from '@troupe/core/internal';
import type { EventEmitter } from 'eventemitter3';
import type { AgentSnapshot, AgentStatus } from '../AgentHandle.js';
import type { Durability } from '../persistence/Durability.js';
import type { RunStatus } from '../persistence/Persistence.js';
import {
  type AgentStateEnvelope,
  type MessageStartRecord,
  STATE_ENVELOPE_VERSION,
} from '../persistence/StateEnvelope.js';
import type { RunTree } from '../RunTree.js';
import type { SupervisorEvents } from '../SupervisorEvents.js';
import { type RunNode, type SavedConversation, totalOf } from './RunNode.js';

/** What a conversation has while a save or a check is in flight, or once its owner gave up on its saves. */
interface SaveFlight {
  /** The saves in flight, each told `abandon`'s error if it comes first. */
  readonly saves: Set<(error: Error) => void>;
  /** Set while the store is asked whether another process moved this copy on. */
  checking: boolean;
  /** The error its owner gave up with (see {@link Conversation.abandon}). */
  abandonedWith: Error | undefined;
}

/** What a parent agent's conversation starts from (see {@link Conversation}). */
export interface ConversationInit {
  readonly agentId: AgentId;
  readonly conversationId: string;
  readonly agentName: string;
  readonly state: LoopState;
  readonly children: number;
  /** The revision of its saved envelope (0: none saved; undefined: the store does not fence). */
  readonly revision: number | undefined;
  /** The keys of the toolContext it runs with (saved, so a restore without one of them is refused). */
  readonly toolContextKeys: readonly string[];
}

/** What a conversation borrows from its agent's supervisor (one object: a parent agent's deps). */
export interface ConversationDeps {
  readonly durability: Durability | undefined;
  readonly events: EventEmitter<SupervisorEvents>;
  readonly clock: Clock;
  readonly tree: RunTree;
}

/**
 * What a parent agent remembers of its conversation between messages, and how
 * it saves it: the state (the run's, while a message is suspended), the last
 * good state it falls back to, the subagents numbered so far, the input not
 * saved yet, and — with a store — the envelope's revision every save is based
 * on. A save is one transaction through durability; its failure is reported
 * (`persistence.failed`) and returned, never thrown. Its owner may give up on
 * a save that never answers (a shutdown's grace period): from then on every
 * save in flight, and every later one, returns the abandon's error at once.
 */
export class Conversation implements SavedConversation {
  readonly agentId: AgentId;
  readonly conversationId: string;
  readonly agentName: string;
  /** The keys of its toolContext (saved with every envelope; the values never are). */
  readonly toolContextKeys: readonly string[];
  /** The state: the conversation's, or (a message suspended) the run's. */
  state: LoopState;
  /** The last good state (what a failed message falls back to). */
  checkpoint: LoopState;
  /** Subagents numbered so far in this conversation (ids are never given twice). */
  children: number;
  /** The input of the current message, until it is saved. */
  unsaved: string | undefined = undefined;
  /** With a store: the revision of its saved envelope every save is based on (see {@link Conversation.saved}). */
  revision: number | undefined;
  readonly #deps: ConversationDeps;
  /** While a save or a check is in flight, or once given up (an idle conversation has none: 16 B less). */
  #flight: SaveFlight | undefined;

  constructor(init: ConversationInit, deps: ConversationDeps) {
    this.agentId = init.agentId;
    this.conversationId = init.conversationId;
    this.agentName = init.agentName;
    this.toolContextKeys = init.toolContextKeys;
    this.state = init.state;
    this.checkpoint = init.state;
    this.children = init.children;
    this.revision = init.revision;
    this.#deps = deps;
  }

  /** Where its runs are saved, with its envelope's revision: itself (none without a store). */
  get saved(): SavedConversation | undefined {
    return this.#deps.durability === undefined ? undefined : this;
  }

  /** What an agent handle's `snapshot()` shows (`suspended`: the message's run, when it waits). */
  snapshot(status: AgentStatus, suspended: RunNode | undefined, pendingRequest: Request | undefined): AgentSnapshot {
    const s = this.state;
    return {
      agentId: this.agentId,
      status,
      messages: s.messages,
      todos: s.todos,
      metadata: s.metadata,
      events: s.events,
      turns: s.turns,
      usage: s.usage,
      totalUsage:
        suspended === undefined ? totalUsage(s) : addUsage(this.checkpoint.childUsage ?? NO_USAGE, totalOf(suspended)),
      pendingRequest,
    };
  }

  /**
   * `state` is good: the conversation goes on from it. Kept until the next message, maybe for days:
   * pass it as `compactIdleState` made it (and save that one: a store may keep the same object).
   */
  keep(state: LoopState): void {
    this.state = state;
    this.checkpoint = state;
  }

  /** The message's work is not kept: back to the last good state, its input dropped. */
  fallBack(): void {
    this.state = this.checkpoint;
    this.unsaved = undefined;
  }

  /** Number its next subagents from at least `n` (a restore: ids given before a crash are not given again). */
  reserveChildren(n: number): void {
    this.children = Math.max(this.children, n);
  }

  /** The conversation's envelope as it is saved now (`root`: the message's run, when it is suspended). */
  envelope(status: AgentStateEnvelope['status'], root: RunNode | undefined, state: LoopState): AgentStateEnvelope {
    return conversationEnvelope({
      agentId: this.agentId,
      conversationId: this.conversationId,
      agentName: this.agentName,
      toolContextKeys: this.toolContextKeys,
      status,
      root: root !== undefined && root.phase === 'suspended' ? root : undefined,
      runId: root?.id,
      state,
      before: this.checkpoint,
      children: Math.max(this.children, root?.nextChild ?? 0),
      tree: this.#deps.tree,
      at: this.#deps.clock.now(),
    });
  }

  /**
   * Save the conversation as the message left it, in one transaction: the
   * envelope, the messages to show (the input, unless saved when it started;
   * the answer), and the root run's final row. Resolves with the store's
   * error when it failed (also reported as `persistence.failed`), or with
   * the abandon's error at once when its owner gave up on it (see abandon).
   */
  async save(
    root: RunNode,
    status: 'idle' | 'suspended' | 'failed',
    run: RunStatus | undefined,
    text: string | undefined,
    state: LoopState = this.state,
  ): Promise<Error | undefined> {
    if (this.#deps.durability === undefined) return undefined;
    const messages: { role: 'user' | 'assistant'; content: string }[] = [];
    if (this.unsaved !== undefined) messages.push({ role: 'user', content: this.unsaved });
    if (text !== undefined) messages.push({ role: 'assistant', content: text });
    const envelope = this.envelope(
      status === 'failed' ? 'idle' : status,
      status === 'suspended' ? root : undefined,
      state,
    );
    const failed = await this.#saveOnce(root, envelope, messages, run);
    if (failed === undefined && status !== 'suspended') this.unsaved = undefined;
    return failed;
  }

  /**
   * Ask the store (once at a time; only one other processes share) whether another process carried
   * this conversation past the copy suspended at `root` (`asked`: its open questions' ids): `behind`
   * is told why when it did, `current` when it did not (a store that cannot answer now counts as
   * not: nothing is refused on a guess). False, and nothing asked, without a durable store.
   */
  whenBehind(
    root: RunNode,
    asked: readonly string[],
    behind: (why: string) => void,
    current: () => void = () => {},
  ): boolean {
    const durability = this.#deps.durability;
    if (durability === undefined || !durability.durable) return false;
    // A check in flight answers for what was queued since: its outcome acts on the whole mailbox.
    if (this.#flight?.checking === true) return true;
    this.#flying().checking = true;
    void durability.behind(root, asked).then((why) => {
      // Checking: the flight stays until this.
      (this.#flight as SaveFlight).checking = false;
      this.#landed();
      if (why !== undefined) behind(why);
      else current();
    });
    return true;
  }

  /** The error its owner gave up with, if it did. */
  get abandonedWith(): Error | undefined {
    return this.#flight?.abandonedWith;
  }

  /** Stop waiting for saves: each in flight returns `error` now. False when it was given up already. */
  abandon(error: Error): boolean {
    if (this.#flight?.abandonedWith !== undefined) return false;
    const flight = this.#flying();
    flight.abandonedWith = error;
    for (const giveUp of [...flight.saves]) giveUp(error);
    return true;
  }

  #flying(): SaveFlight {
    this.#flight ??= { saves: new Set(), checking: false, abandonedWith: undefined };
    return this.#flight;
  }

  // Nothing in flight, not given up: an idle conversation keeps no flight (nor its empty Set, 152 B).
  #landed(): void {
    const flight = this.#flight;
    if (flight !== undefined && flight.saves.size === 0 && !flight.checking && flight.abandonedWith === undefined) {
      this.#flight = undefined;
    }
  }

  // The envelope, the messages to show and (when given) the root run's row, with its give-up.
  #saveOnce(
    root: RunNode,
    envelope: AgentStateEnvelope,
    messages: readonly { role: 'user' | 'assistant'; content: string }[],
    run: RunStatus | undefined,
  ): Promise<Error | undefined> {
    const abandoned = this.#flight?.abandonedWith;
    if (abandoned !== undefined) return Promise.resolve(abandoned);
    const saving = this.#saveNow(root, envelope, messages, run);
    // Each save its own give-up, dropped when it settles (a race against one long-lived promise
    // would add a reaction to it per save, kept for the agent's life: 1.7 KB a conversation).
    return new Promise<Error | undefined>((resolve) => {
      const saves = this.#flying().saves;
      saves.add(resolve);
      const done = (value: Error | undefined): void => {
        saves.delete(resolve);
        this.#landed();
        resolve(value);
      };
      saving.then(done, (error: unknown) => done(error instanceof Error ? error : new Error(String(error))));
    });
  }

  async #saveNow(
    root: RunNode,
    envelope: AgentStateEnvelope,
    messages: readonly { role: 'user' | 'assistant'; content: string }[],
    run: RunStatus | undefined,
  ): Promise<Error | undefined> {
    try {
      await (this.#deps.durability as Durability).conversationSaved(root, envelope, messages, run);
      return undefined;
    } catch (error) {
      const failure =
        error instanceof TroupeError
          ? error
          : new TroupeError(`saving agent ${this.agentId} failed: ${(error as Error)?.message ?? String(error)}`, {
              code: 'ERR_STORE_WRITE',
              cause: error,
            });
      this.#deps.events.emit('persistence.failed', {
        agentId: this.agentId,
        runId: root.id,
        error: failure,
        at: this.#deps.clock.now(),
      });
      return failure;
    }
  }
}

// The conversation before a message, saved with the message's suspended state (its messages are a prefix of those).
export function messageStart(checkpoint: LoopState): MessageStartRecord {
  const { messages, ...state } = checkpoint;
  return { messageCount: messages.length, state };
}

// `state` with the conversation's tokens: those it had at the message's `start`, plus the
// message's own (`usage`) and its subagents' (`total` less `usage`).
export function withMessageUsage(state: LoopState, start: LoopState, usage: Usage, total: Usage): LoopState {
  const own = addUsage(start.usage, usage);
  const children = addUsage(start.childUsage ?? NO_USAGE, subtractUsage(total, usage));
  if (usageEquals(state.usage, own) && usageEquals(state.childUsage ?? NO_USAGE, children)) return state;
  return { ...state, usage: own, childUsage: children };
}

/** What a conversation's envelope is made from (see {@link conversationEnvelope}). */
export interface EnvelopeParts {
  readonly agentId: string;
  readonly conversationId: string;
  readonly agentName: string;
  /** The keys of the conversation's toolContext. */
  readonly toolContextKeys: readonly string[];
  readonly status: AgentStateEnvelope['status'];
  /** The message's root run, when it is suspended (its questions go in the envelope). */
  readonly root: RunNode | undefined;
  readonly runId: string | undefined;
  readonly state: LoopState;
  /** The conversation before the message (saved with a suspended message's state). */
  readonly before: LoopState;
  /** Children numbered so far (ids are never given twice). */
  readonly children: number;
  readonly tree: RunTree;
  readonly at: number;
}

/** A parent agent's conversation as it is saved: its state, the message's questions, what it was before the message. */
export function conversationEnvelope(p: EnvelopeParts): AgentStateEnvelope {
  const root = p.root;
  const pending = root === undefined ? undefined : p.tree.requests.firstOpen(root);
  return {
    version: STATE_ENVELOPE_VERSION,
    agentId: p.agentId as AgentId,
    conversationId: p.conversationId,
    agentName: p.agentName,
    status: p.status,
    state: p.state,
    waitingOn: pending?.request.id,
    runId: p.runId,
    pendingRequest:
      pending === undefined ? undefined : { request: pending.request, path: pending.path, openedAt: p.at },
    openRequests:
      root === undefined
        ? undefined
        : [...p.tree.requests.of(root).values()]
            .filter((r) => r.answer === undefined)
            .map((r) => ({ id: r.id, toolCallId: r.toolCallId, local: r.local, approval: r.approval })),
    childCounter: p.children,
    savedAt: p.at,
    before: p.status === 'suspended' && p.state !== p.before ? messageStart(p.before) : undefined,
    ...(p.toolContextKeys.length === 0 ? {} : { toolContextKeys: p.toolContextKeys }),
  };
}

/**
 * What the children of an interrupted message had spent before the crash: those that ended in
 * its completed turns (its state's `childUsage`, less the conversation's before it), those of
 * the turn it resumes (on its resolved calls), and those the crash cut off (`lost`, for the open
 * calls its resume fails).
 */
export function resumedChildUsage(message: InterruptedMessage, before: LoopState): Usage {
  const state = message.state;
  let total = subtractUsage(state.childUsage ?? NO_USAGE, before.childUsage ?? NO_USAGE);
  for (const p of state.pending ?? []) {
    if (p.result !== undefined) {
      if (p.usage !== undefined) total = addUsage(total, p.usage);
    } else {
      const lost = message.lost?.get(p.call.id);
      if (lost !== undefined) total = addUsage(total, lost);
    }
  }
  return total;
}

/**
 * With a durable store, what saves a message's input before anything of it runs (with the run's
 * row: its state holds the input, so a resume after a crash starts from it); `input` undefined:
 * a resume, whose input is saved already.
 */
export function messageStarter(
  durability: Durability,
  input: string | undefined,
  from: LoopState,
  envelope: (root: RunNode) => AgentStateEnvelope,
): (root: RunNode) => Promise<void> {
  const message = input === undefined ? undefined : sealMessage({ role: 'user' as const, content: input });
  const state =
    message === undefined
      ? from
      : { ...from, failedTurns: 0, messageStartTurn: from.turns, messages: [...from.messages, message] };
  return (root) => durability.messageStarted(root, envelope(root), message, state);
}

/** A message a crash interrupted, as saved: resumed by the parent agent's `resume()`. */
export interface InterruptedMessage {
  readonly runId: string;
  /** The attempt its row was saved with (the resume writes a higher one). */
  readonly attempt: number;
  /** The state of its last saved turn. */
  readonly state: LoopState;
  /** Its tool calls that started and never committed (toolCallId, attempt). */
  readonly started: readonly { readonly toolCallId: string; readonly attempt: number }[];
  /**
   * What the subagents of its open `task` calls had spent (their subtrees) when the crash
   * interrupted them, by toolCallId: counted in the message's totals, and on the calls' results.
   */
  readonly lost?: ReadonlyMap<string, Usage> | undefined;
}

const NO_KEYS: readonly string[] = Object.freeze([]);

/** A toolContext's keys, sorted (none: one shared empty list, not an array per idle conversation). */
export function toolContextKeys(toolContext: object): readonly string[] {
  const keys = Object.keys(toolContext);
  return keys.length === 0 ? NO_KEYS : keys.sort();
}
