import { BackpressureError } from '@troupe/core';
import type { HeldMessage, HeldRecord, HeldShell } from './HeldState.js';
import type { RequestRecord, RunRecord, ToolCallRecord } from './Persistence.js';

// The rows of a MemoryPersistence: conversations in recency order, and the
// indexes that find a run's, a tool call's or a request's conversation.
// Keys join the tenant and an id with a NUL, which no id holds.

export interface StoredRun {
  json: string;
  status: RunRecord['status'];
  attempt: number;
  updatedAt: number;
}

export interface StoredRequest {
  conv: Conversation;
  json: string;
  status: RequestRecord['status'];
  openedAt: number;
  closedAt: number | undefined;
}

/**
 * What a conversation keeps of one of its agents: its saved envelope as held (see HeldState), that
 * envelope's revision, and the messages to show. The fields of a held envelope are fields of its
 * rows, not an object of their own beside them.
 */
export interface AgentRows {
  /** The agent (a conversation's own rows, its first agent's: undefined until it has one). */
  agentId: string | undefined;
  /**
   * The saved envelope (undefined: none): its JSON, with `state.messages` written as their number
   * when it has {@link heldMessages}; or, for an envelope held as itself (see {@link HeldShell}),
   * its state, with its other fields the fields below.
   */
  held: string | object | undefined;
  /**
   * The state's messages as held, when they were split off the envelope and are not the held
   * state's own list (see {@link heldMessages}).
   */
  split: readonly HeldMessage[] | undefined;
  /** The revision of the saved envelope (counted up by each save). */
  revision: number;
  // The fields of the envelope saved that a listing shows; with one held as itself, also the
  // others it is read back with.
  version: unknown;
  agentName: unknown;
  status: unknown;
  childCounter: unknown;
  savedAt: unknown;
  /**
   * The messages to show (held: see HeldState), when they are not {@link AgentRows.shownFrom} to
   * {@link AgentRows.shownTo} of the state's.
   */
  shown: readonly HeldMessage[] | undefined;
  /**
   * Where the messages to show are in the state's held list, while they are a run of it (a chat's
   * are: its input and answers, the state's own objects): `shownFrom` to `shownTo`, end excluded
   * (equal: none). A list of its own only once they are not.
   */
  shownFrom: number;
  shownTo: number;
}

/** The rows of an agent other than a conversation's first (most conversations have one agent). */
class OtherRows implements AgentRows {
  held: string | object | undefined = undefined;
  split: readonly HeldMessage[] | undefined = undefined;
  revision = 0;
  version: unknown = undefined;
  agentName: unknown = undefined;
  status: unknown = undefined;
  childCounter: unknown = undefined;
  savedAt: unknown = undefined;
  shown: readonly HeldMessage[] | undefined = undefined;
  shownFrom = 0;
  shownTo = 0;
  constructor(readonly agentId: string) {}
}

/** What a conversation between messages seldom has: made by its first use. */
export interface ConversationExtras {
  /** {@link AgentRows.split} of its first agent. */
  split: readonly HeldMessage[] | undefined;
  /** {@link AgentRows.shown} of its first agent. */
  shown: readonly HeldMessage[] | undefined;
  /** The rows of its agents but the first. */
  others: Map<string, AgentRows> | undefined;
  /** Whose envelope was saved last, when that is not the first agent's. */
  summary: AgentRows | undefined;
  runs: Map<string, StoredRun> | undefined;
  /** runId → call key → record (records hold primitives only: copied by spreading). */
  toolCalls: Map<string, Map<string, ToolCallRecord>> | undefined;
  requests: Set<string> | undefined;
  /** Its requests still open. */
  open: number;
}

/**
 * A conversation of a memory store. An idle one is one object: its first agent's rows in place (it
 * is them: see {@link AgentRows}) and its place in the store's order of recency; what it seldom has
 * is in {@link ConversationExtras}, made on first use.
 */
export class Conversation implements AgentRows {
  /** The conversations used less and more recently (see {@link ConversationTable}). */
  older: Conversation | undefined = undefined;
  newer: Conversation | undefined = undefined;
  agentId: string | undefined = undefined;
  held: string | object | undefined = undefined;
  revision = 0;
  version: unknown = undefined;
  agentName: unknown = undefined;
  status: unknown = undefined;
  childCounter: unknown = undefined;
  savedAt: unknown = undefined;
  shownFrom = 0;
  shownTo = 0;
  more: ConversationExtras | undefined = undefined;

  constructor(
    readonly tenant: string,
    readonly id: string,
  ) {}

  // Seldom set (see AgentRows.split and AgentRows.shown): in its extras.
  get split(): readonly HeldMessage[] | undefined {
    return this.more?.split;
  }

  set split(list: readonly HeldMessage[] | undefined) {
    if (list !== undefined || this.more !== undefined) this.extras().split = list;
  }

  get shown(): readonly HeldMessage[] | undefined {
    return this.more?.shown;
  }

  set shown(list: readonly HeldMessage[] | undefined) {
    if (list !== undefined || this.more !== undefined) this.extras().shown = list;
  }

  /** Its requests still open. */
  get open(): number {
    return this.more?.open ?? 0;
  }

  /** {@link Conversation.more}, made if it is not. */
  extras(): ConversationExtras {
    this.more ??= {
      split: undefined,
      shown: undefined,
      others: undefined,
      summary: undefined,
      runs: undefined,
      toolCalls: undefined,
      requests: undefined,
      open: 0,
    };
    return this.more;
  }

  /** The rows of the agent whose envelope was saved last (what a listing shows), if one was. */
  get summary(): AgentRows | undefined {
    return this.more?.summary ?? (this.held === undefined ? undefined : this);
  }

  /** `rows` (of this conversation) saved an envelope: the one a listing shows. */
  savedBy(rows: AgentRows): void {
    if (rows === this) {
      if (this.more !== undefined) this.more.summary = undefined;
    } else this.extras().summary = rows;
  }
}

export const SEP = '\u0000';
export const callKey = (k: { toolCallId: string; attempt: number }): string => `${k.toolCallId}${SEP}${k.attempt}`;

/** The rows of `agentId` in `conv`, if it has any. */
export function agentRows(conv: Conversation, agentId: string): AgentRows | undefined {
  return conv.agentId === agentId ? conv : conv.more?.others?.get(agentId);
}

/** The rows of `agentId` in `conv`, made empty if it has none. */
export function obtainAgentRows(conv: Conversation, agentId: string): AgentRows {
  const found = agentRows(conv, agentId);
  if (found !== undefined) return found;
  if (conv.agentId === undefined) {
    conv.agentId = agentId;
    return conv;
  }
  const rows = new OtherRows(agentId);
  const more = conv.extras();
  more.others ??= new Map();
  more.others.set(agentId, rows);
  return rows;
}

/**
 * The envelope `rows` (of `conv`) holds, as HeldState reads it; undefined: none saved. Made for a
 * read: what is kept is the rows' fields.
 */
export function heldRecordOf(conv: Conversation, rows: AgentRows): HeldRecord | undefined {
  const held = rows.held;
  if (held === undefined) return undefined;
  if (typeof held === 'string') return { shell: held, messages: rows.split };
  const shell: HeldShell = {
    version: rows.version,
    agentId: rows.agentId as string,
    conversationId: conv.id,
    agentName: rows.agentName,
    status: rows.status,
    childCounter: rows.childCounter,
    savedAt: rows.savedAt,
    state: held,
  };
  return { shell, messages: heldMessages(rows) };
}

/**
 * The held messages of the state `rows` holds, when they were split off its envelope: a state held
 * as itself (with its own frozen list of messages held as themselves, unless {@link AgentRows.split}
 * says otherwise) always has them.
 */
export function heldMessages(rows: AgentRows): readonly HeldMessage[] | undefined {
  const held = rows.held;
  return (
    rows.split ??
    (typeof held === 'object' ? (held as { readonly messages: readonly HeldMessage[] }).messages : undefined)
  );
}

/**
 * Hold `messages` as the held messages of the state `rows` now holds (set first): the state's own
 * list is not kept a second time.
 */
export function setHeldMessages(rows: AgentRows, messages: readonly HeldMessage[] | undefined): void {
  const held = rows.held;
  rows.split =
    typeof held === 'object' && (held as { readonly messages?: unknown }).messages === messages ? undefined : messages;
}

/** The messages `rows` shows, oldest first. */
export function shownOf(rows: AgentRows): readonly HeldMessage[] {
  if (rows.shown !== undefined) return rows.shown;
  const list = heldMessages(rows);
  return list === undefined || rows.shownTo === rows.shownFrom ? [] : list.slice(rows.shownFrom, rows.shownTo);
}

/** How far back from its end a state's held messages are searched for the first message to show (a turn adds a few). */
const SHOWN_SEARCH = 16;

/**
 * Show `messages` after those `rows` shows: while they are the state's own, next in its list, only
 * where they are is kept; else a list of its own.
 */
export function addShown(rows: AgentRows, messages: readonly HeldMessage[]): void {
  const list = heldMessages(rows);
  if (rows.shown === undefined && list !== undefined) {
    let from = rows.shownFrom;
    let to = rows.shownTo;
    if (from === to) {
      // None shown yet: where the first one is, if it is the state's own.
      from = to = -1;
      for (let i = list.length - 1; i >= 0 && i >= list.length - SHOWN_SEARCH; i--) {
        if (list[i] === messages[0]) {
          from = to = i;
          break;
        }
      }
    }
    let n = 0;
    while (from >= 0 && n < messages.length && to + n < list.length && list[to + n] === messages[n]) n++;
    if (from >= 0 && n === messages.length) {
      rows.shownFrom = from;
      rows.shownTo = to + n;
      return;
    }
  }
  // A list of exactly its length (one grown by push keeps up to half again as many slots).
  rows.shown = shownOf(rows).concat(messages);
  rows.shownFrom = rows.shownTo = 0;
}

/**
 * `rows` is about to hold `next` as its state: messages shown from the state held now are given a
 * list of their own unless `next` holds them in the same places (`kept`: how many messages at the
 * start of its list are those of the state held now).
 */
export function keepShown(rows: AgentRows, kept: number): void {
  if (rows.shown !== undefined || rows.shownTo === rows.shownFrom || kept >= rows.shownTo) return;
  rows.shown = shownOf(rows);
  rows.shownFrom = rows.shownTo = 0;
}

/** Every agent of `conv` with rows. */
export function agentsOf(conv: Conversation): AgentRows[] {
  const all: AgentRows[] = conv.agentId === undefined ? [] : [conv];
  for (const rows of conv.more?.others?.values() ?? []) all.push(rows);
  return all;
}

/**
 * The conversations of a memory store, by tenant and id, in order of recency (a list through them:
 * a touch moves one to its end in place, where a Map it is taken out of and put back in keeps a
 * hole per touch and grows to two to four times the slots it holds), bounded by `max`.
 */
export class ConversationTable {
  /** tenant → conversation id → conversation (keys are the ids as given: no string made per conversation). */
  readonly #byTenant = new Map<string, Map<string, Conversation>>();
  #oldest: Conversation | undefined = undefined;
  #newest: Conversation | undefined = undefined;
  #size = 0;
  readonly runIndex = new Map<string, Conversation>();
  readonly callIndex = new Map<string, Conversation>();
  readonly requests = new Map<string, StoredRequest>();

  constructor(readonly max: number) {}

  /** How many conversations are kept. */
  get size(): number {
    return this.#size;
  }

  /** A conversation, made the most recently used. */
  find(tenant: string, conversationId: string): Conversation | undefined {
    const conv = this.peek(tenant, conversationId);
    if (conv !== undefined && conv !== this.#newest) {
      this.#unlink(conv);
      this.#append(conv);
    }
    return conv;
  }

  /** A conversation, its recency left as it is. */
  peek(tenant: string, conversationId: string): Conversation | undefined {
    return this.#byTenant.get(tenant)?.get(conversationId);
  }

  /** The conversations of `tenant`. */
  of(tenant: string): Iterable<Conversation> {
    return this.#byTenant.get(tenant)?.values() ?? [];
  }

  /** Every conversation, least recently used first. */
  *all(): IterableIterator<Conversation> {
    for (let conv = this.#oldest; conv !== undefined; conv = conv.newer) yield conv;
  }

  obtain(tenant: string, conversationId: string): Conversation {
    const found = this.find(tenant, conversationId);
    if (found !== undefined) return found;
    if (this.#size >= this.max) this.#evictOne();
    const conv = new Conversation(tenant, conversationId);
    let ids = this.#byTenant.get(tenant);
    if (ids === undefined) {
      ids = new Map();
      this.#byTenant.set(tenant, ids);
    }
    ids.set(conversationId, conv);
    this.#append(conv);
    this.#size++;
    return conv;
  }

  #append(conv: Conversation): void {
    conv.older = this.#newest;
    conv.newer = undefined;
    if (this.#newest === undefined) this.#oldest = conv;
    else this.#newest.newer = conv;
    this.#newest = conv;
  }

  #unlink(conv: Conversation): void {
    if (conv.older === undefined) this.#oldest = conv.newer;
    else conv.older.newer = conv.newer;
    if (conv.newer === undefined) this.#newest = conv.older;
    else conv.newer.older = conv.older;
    conv.older = conv.newer = undefined;
  }

  #evictOne(): void {
    for (let conv = this.#oldest; conv !== undefined; conv = conv.newer) {
      if (conv.open === 0) {
        this.drop(conv);
        return;
      }
    }
    throw new BackpressureError(
      `all ${this.max} kept conversations wait on a person: answer or withdraw their requests, raise maxConversations, or use the SQLite store`,
      this.max,
    );
  }

  drop(conv: Conversation): void {
    const ids = this.#byTenant.get(conv.tenant);
    if (ids?.get(conv.id) !== conv) return;
    ids.delete(conv.id);
    if (ids.size === 0) this.#byTenant.delete(conv.tenant);
    this.#unlink(conv);
    this.#size--;
    const more = conv.more;
    if (more === undefined) return;
    for (const runId of more.runs?.keys() ?? []) this.runIndex.delete(`${conv.tenant}${SEP}${runId}`);
    for (const runId of more.toolCalls?.keys() ?? []) this.callIndex.delete(`${conv.tenant}${SEP}${runId}`);
    for (const requestId of more.requests ?? []) this.requests.delete(`${conv.tenant}${SEP}${requestId}`);
  }

  clear(): void {
    this.#byTenant.clear();
    while (this.#oldest !== undefined) this.#unlink(this.#oldest);
    this.#size = 0;
    this.runIndex.clear();
    this.callIndex.clear();
    this.requests.clear();
  }
}
