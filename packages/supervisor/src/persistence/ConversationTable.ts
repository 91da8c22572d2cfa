import { BackpressureError } from '@troupe/core';
import type { ConversationSummary, RequestRecord, RunRecord, ToolCallRecord } from './Persistence.js';

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

export interface Conversation {
  readonly key: string;
  readonly tenant: string;
  readonly id: string;
  /** agentId → its envelope's JSON and revision (counted up by each save). */
  readonly states: Map<string, { readonly json: string; readonly revision: number }>;
  summary: Omit<ConversationSummary, 'openRequests'> | undefined;
  readonly messages: Map<string, string[]>;
  readonly runs: Map<string, StoredRun>;
  /** runId → call key → record (records hold primitives only: copied by spreading). */
  readonly toolCalls: Map<string, Map<string, ToolCallRecord>>;
  readonly requests: Set<string>;
  open: number;
}

export const SEP = '\u0000';
export const callKey = (k: { toolCallId: string; attempt: number }): string => `${k.toolCallId}${SEP}${k.attempt}`;

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
      states: new Map(),
      summary: undefined,
      messages: new Map(),
      runs: new Map(),
      toolCalls: new Map(),
      requests: new Set(),
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
    for (const runId of conv.runs.keys()) this.runIndex.delete(`${conv.tenant}${SEP}${runId}`);
    for (const runId of conv.toolCalls.keys()) this.callIndex.delete(`${conv.tenant}${SEP}${runId}`);
    for (const requestId of conv.requests) this.requests.delete(`${conv.tenant}${SEP}${requestId}`);
  }

  clear(): void {
    this.conversations.clear();
    this.runIndex.clear();
    this.callIndex.clear();
    this.requests.clear();
  }
}
