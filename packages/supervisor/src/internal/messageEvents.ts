import type { CancelReason, Usage } from '@troupe/core';
import type { EventEmitter } from 'eventemitter3';
import type { AgentReply } from '../AgentHandle.js';
import type { SupervisorEvents } from '../SupervisorEvents.js';
import type { FinalEnd } from './RunNode.js';

/** How a parent agent's message settled, as its outcome event reports it. */
export type MessageOutcome =
  | { readonly status: 'suspended'; readonly requestId: string }
  | { readonly status: 'done'; readonly turns: number }
  | { readonly status: 'incomplete'; readonly turns: number }
  | { readonly status: 'cancelled'; readonly reason: CancelReason }
  | { readonly status: 'failed'; readonly kind: 'defect' | 'failure'; readonly error: Error };

/** The run a message event names, and what it spent. */
export interface MessageRef {
  readonly agentId: string;
  readonly runId: string;
  readonly path: readonly string[];
  readonly usage: Usage;
  readonly totalUsage: Usage;
  readonly at: number;
}

/**
 * A parent agent's message settled: its outcome event (`agent.suspended`,
 * `agent.done`, `agent.incomplete`, `agent.cancelled`, `agent.failed`), the
 * fields every outcome shares built once, then the outcome's own.
 */
export function emitMessageOutcome(
  events: EventEmitter<SupervisorEvents>,
  ref: MessageRef,
  outcome: MessageOutcome,
): void {
  // One literal, then the status's own fields set on it (a spread into a literal is slow on Node 20).
  const payload: Record<string, unknown> = {
    agentId: ref.agentId,
    runId: ref.runId,
    path: ref.path,
    usage: ref.usage,
    totalUsage: ref.totalUsage,
    at: ref.at,
  };
  // The outcome holds exactly its status's own fields: copied as they are, after the shared ones.
  const own = outcome as unknown as Readonly<Record<string, unknown>>;
  for (const key in own) if (key !== 'status') payload[key] = own[key];
  (events.emit as (name: string, payload: unknown) => boolean)(`agent.${outcome.status}`, payload);
}

/**
 * A message whose run ended `done`, `incomplete` or `cancelled` and was saved: its outcome event,
 * and its reply (the same fields as the event, with the reply's own).
 */
export function endedReply(
  events: EventEmitter<SupervisorEvents>,
  ref: MessageRef,
  end: Extract<FinalEnd, { readonly status: 'done' | 'incomplete' | 'cancelled' }>,
  turns: number,
): AgentReply {
  const { usage, totalUsage } = ref;
  if (end.status === 'cancelled') {
    emitMessageOutcome(events, ref, { status: 'cancelled', reason: end.reason });
    return { status: 'cancelled', reason: end.reason, usage, totalUsage };
  }
  emitMessageOutcome(events, ref, { status: end.status, turns });
  if (end.status === 'incomplete') return { status: 'incomplete', turns, usage, totalUsage };
  return end.output === undefined
    ? { status: 'done', text: end.text, turns, usage, totalUsage }
    : { status: 'done', text: end.text, output: end.output, turns, usage, totalUsage };
}
