import { BackpressureError } from '@troupe/core';
import type { HeldMessage, HeldRecord } from './HeldState.js';
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

/** An agent's envelope as held (see HeldState), with its revision (counted up by each save). */
export interface StoredState extends HeldRecord {
  readonly revision: number;
}

/** What a conversation keeps of one of its agents. */
export interface AgentRows {
  readonly agentId: string;
  state: StoredState | undefined;
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

/** What {@link ConversationSummary} a conversation shows is made from: its last saved envelope (a held shell is one). */
export interface SummarySource {
  readonly conversationId: string;
  readonly agentId: string;
  readonly agentName: unknown;
  readonly status: unknown;
  readonly savedAt: unknown;
}

export interface Conversation {
  readonly key: string;
  readonly tenant: string;
  readonly id: string;
  // Its first agent's rows in place, any other's in a Map made for them: most conversations have
  // one agent, and a Map costs ~180 B before it holds anything.
  first: AgentRows | undefined;
  others: Map<string, AgentRows> | undefined;
  summary: SummarySource | undefined;
  // Made by their first row: an idle conversation has none, and an empty Map costs ~150 B.
  runs: Map<string, StoredRun> | undefined;
  /** runId → call key → record (records hold primitives only: copied by spreading). */
  toolCalls: Map<string, Map<string, ToolCallRecord>> | undefined;
  requests: Set<string> | undefined;
  open: number;
}

export const SEP = '\u0000';
export const callKey = (k: { toolCallId: string; attempt: number }): string => `${k.toolCallId}${SEP}${k.attempt}`;

/** The rows of `agentId` in `conv`, if it has any. */
export function agentRows(conv: Conversation, agentId: string): AgentRows | undefined {
  return conv.first?.agentId === agentId ? conv.first : conv.others?.get(agentId);
}

/** The rows of `agentId` in `conv`, made empty if it has none. */
export function obtainAgentRows(conv: Conversation, agentId: string): AgentRows {
  const found = agentRows(conv, agentId);
  if (found !== undefined) return found;
  const rows: AgentRows = { agentId, state: undefined, shown: undefined, shownFrom: 0, shownTo: 0 };
  if (conv.first === undefined) conv.first = rows;
  else {
    conv.others ??= new Map();
    conv.others.set(agentId, rows);
  }
  return rows;
}

/** The messages `rows` shows, oldest first. */
export function shownOf(rows: AgentRows): readonly HeldMessage[] {
  if (rows.shown !== undefined) return rows.shown;
  const list = rows.state?.messages;
  return list === undefined || rows.shownTo === rows.shownFrom ? [] : list.slice(rows.shownFrom, rows.shownTo);
}

/** How far back from its end a state's held messages are searched for the first message to show (a turn adds a few). */
const SHOWN_SEARCH = 16;

/**
 * Show `messages` after those `rows` shows: while they are the state's own, next in its list, only
 * where they are is kept; else a list of its own.
 */
export function addShown(rows: AgentRows, messages: readonly HeldMessage[]): void {
  const list = rows.state?.messages;
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
  const all = conv.first === undefined ? [] : [conv.first];
  for (const rows of conv.others?.values() ?? []) all.push(rows);
  return all;
}

/** The conversations of a memory store, least recently used first, bounded by `max`. */
export class ConversationTable {
  // Insertion order is recency: a touched conversation is re-inserted at the end.
  readonly conversations = new Map<string, Conversation>();
  readonly runIndex = new Map<string, Conversation>();
  readonly callIndex = new Map<string, Conversation>();
  readonly requests = new Map<string, StoredRequest>();

  constructor(readonly max: number) {}

  find(tenant: string, conversationId: string): Conversation | undefined {
    const key = `${tenant}${SEP}${conversationId}`;
    const conv = this.conversations.get(key);
    if (conv !== undefined) {
      this.conversations.delete(key);
      this.conversations.set(key, conv);
    }
    return conv;
  }

  obtain(tenant: string, conversationId: string): Conversation {
    const found = this.find(tenant, conversationId);
    if (found !== undefined) return found;
    if (this.conversations.size >= this.max) this.#evictOne();
    const key = `${tenant}${SEP}${conversationId}`;
    const conv: Conversation = {
      key,
      tenant,
      id: conversationId,
      first: undefined,
      others: undefined,
      summary: undefined,
      runs: undefined,
      toolCalls: undefined,
      requests: undefined,
      open: 0,
    };
    this.conversations.set(key, conv);
    return conv;
  }

  #evictOne(): void {
    for (const conv of this.conversations.values()) {
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
    this.conversations.delete(conv.key);
    for (const runId of conv.runs?.keys() ?? []) this.runIndex.delete(`${conv.tenant}${SEP}${runId}`);
    for (const runId of conv.toolCalls?.keys() ?? []) this.callIndex.delete(`${conv.tenant}${SEP}${runId}`);
    for (const requestId of conv.requests ?? []) this.requests.delete(`${conv.tenant}${SEP}${requestId}`);
  }

  clear(): void {
    this.conversations.clear();
    this.runIndex.clear();
    this.callIndex.clear();
    this.requests.clear();
  }
}
