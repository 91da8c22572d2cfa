import type { AgentId, CancelReason, Message, Metadata, Request, SessionEvent, Todo, Usage } from '@troupe/core';

/** What a parent agent's message ended with. A union discriminated on `status`. */
export type AgentReply =
  | { readonly status: 'done'; readonly text: string; readonly turns: number }
  | {
      readonly status: 'suspended';
      readonly request: Request;
      /** Agent ids from this agent down to the one whose tool asked. */
      readonly path: readonly AgentId[];
    }
  | {
      readonly status: 'failed';
      readonly error: Error;
      /** True when the restart policy restarted the agent; false when it stopped it. */
      readonly restarted: boolean;
    }
  | { readonly status: 'cancelled'; readonly reason: CancelReason }
  | { readonly status: 'incomplete'; readonly turns: number };

/** Where a parent agent is in its life. */
export type AgentStatus = 'idle' | 'running' | 'suspended' | 'stopped';

/** A read-only copy of a parent agent's state. */
export interface AgentSnapshot {
  readonly agentId: AgentId;
  readonly status: AgentStatus;
  readonly messages: readonly Message[];
  readonly todos: readonly Todo[];
  readonly metadata: Metadata;
  readonly events: readonly SessionEvent[];
  readonly turns: number;
  readonly usage: Usage;
  /** The open request when suspended. */
  readonly pendingRequest: Request | undefined;
}

/**
 * A parent agent, as the host holds it: an actor with a mailbox. Messages are
 * processed one at a time, in order; different agents run concurrently.
 */
export interface AgentHandle {
  readonly id: AgentId;
  readonly name: string;
  readonly conversationId: string;
  readonly status: AgentStatus;
  /**
   * Run a turn of the agent loop with `message` as the user's input.
   * Resolves with the reply (a suspension resolves it too: answer the request
   * with `supervisor.answer`). Rejects with a `BackpressureError` when the
   * mailbox is full, a `ClosedError` after close, an `ERR_AGENT_STOPPED`
   * error once stopped. Aborting `signal` cancels this message only.
   */
  send(message: string, options?: { readonly signal?: AbortSignal }): Promise<AgentReply>;
  /**
   * Cancel the running message (its children first: their slots are pushed
   * down), or withdraw the open request when suspended. Returns false when
   * there was nothing to cancel.
   */
  cancel(reason?: CancelReason): boolean;
  snapshot(): AgentSnapshot;
  /** Cancel what runs, refuse further messages, persist. Idempotent. */
  stop(): Promise<void>;
}
