import type { AgentId, LoopState, Message, Request } from '@troupe/core';

/** Bumped when the saved shape changes; loaders refuse versions they do not know. */
export const STATE_ENVELOPE_VERSION = 1;

/** What a persistence callback learns besides the scope. */
export interface PersistenceContext {
  readonly agentId: AgentId;
  readonly conversationId: string;
}

/**
 * An agent's saved state: versioned, never holding the scope (the caller
 * re-supplies it on restore).
 */
export interface AgentStateEnvelope {
  readonly version: typeof STATE_ENVELOPE_VERSION;
  readonly agentId: AgentId;
  readonly conversationId: string;
  readonly agentName: string;
  readonly state: LoopState;
  /** The open request when the agent is suspended. */
  readonly pendingRequest: PendingRequestRecord | undefined;
  /** The conversation's own open questions when it is suspended (ids as the host knows them). */
  readonly openRequests?:
    | readonly {
        readonly id: string;
        readonly toolCallId: string;
        readonly local: Request;
        readonly approval: boolean;
      }[]
    | undefined;
  /** How many subagents this agent has spawned (ids are never reused). */
  readonly childCounter: number;
  readonly savedAt: number;
}

/** A request waiting for a person, as saved. */
export interface PendingRequestRecord {
  readonly request: Request;
  /** Agent ids from the parent agent down to the one whose tool asked. */
  readonly path: readonly AgentId[];
  readonly openedAt: number;
}

/**
 * Where a supervisor keeps what must outlive a process (sagents persistence
 * behaviour): callbacks take the scope first, so a store can partition by
 * tenant, but the scope itself is never persisted.
 */
export interface PersistenceAdapter {
  persistState(scope: unknown, data: AgentStateEnvelope, context: PersistenceContext): Promise<void>;
  loadState(scope: unknown, context: PersistenceContext): Promise<AgentStateEnvelope | undefined>;
  /** A message shown to people (the transcript as displayed), in order. */
  saveMessage(scope: unknown, message: Message, context: PersistenceContext): Promise<void>;
  /** Release the store (close files). Idempotent. */
  close?(): Promise<void>;
}

/** An in-memory {@link PersistenceAdapter}, for tests and scripts. Copies on the way in and out. */
export class MemoryPersistence implements PersistenceAdapter {
  readonly #states = new Map<string, AgentStateEnvelope>();
  readonly #messages = new Map<string, Message[]>();

  async persistState(_scope: unknown, data: AgentStateEnvelope, context: PersistenceContext): Promise<void> {
    this.#states.set(`${context.conversationId}/${context.agentId}`, structuredClone(data));
  }

  async loadState(_scope: unknown, context: PersistenceContext): Promise<AgentStateEnvelope | undefined> {
    const saved = this.#states.get(`${context.conversationId}/${context.agentId}`);
    return saved === undefined ? undefined : structuredClone(saved);
  }

  async saveMessage(_scope: unknown, message: Message, context: PersistenceContext): Promise<void> {
    const key = `${context.conversationId}/${context.agentId}`;
    let list = this.#messages.get(key);
    if (list === undefined) {
      list = [];
      this.#messages.set(key, list);
    }
    list.push(structuredClone(message));
  }

  /** The display messages saved for an agent of a conversation. */
  messages(context: PersistenceContext): readonly Message[] {
    return this.#messages.get(`${context.conversationId}/${context.agentId}`) ?? [];
  }

  /** How many agent states are saved. */
  get size(): number {
    return this.#states.size;
  }
}
