import type { AgentId, ToolCallId } from './Id.js';

/** Fields common to every tool telemetry event. */
export interface ToolEventBase {
  readonly toolName: string;
  readonly toolCallId: ToolCallId;
  readonly agentId: AgentId;
  readonly attempt: number;
  /** When it happened, in the `Clock` base. */
  readonly at: number;
}

/** `tool.execute.start`: an attempt begins. */
export type ToolStartEvent = ToolEventBase;

/** `tool.execute.stop`: the call ended (after its last attempt). */
export interface ToolStopEvent extends ToolEventBase {
  readonly durationMs: number;
  readonly status: 'ok' | 'error' | 'pending';
  /** Why an `error` ended it: thrown, returned, validation, approval, timeout, cancelled, unknown_tool. */
  readonly failure?: ToolFailureKind | undefined;
  /** What the approval handler decided, for a tool with `requiresApproval`. */
  readonly approval?: 'approved' | 'edited' | 'rejected' | 'asked' | 'pre-approved' | undefined;
}

/** What kind of failure a `tool.execute.exception` reports. */
export type ToolFailureKind =
  | 'thrown'
  | 'returned'
  | 'validation'
  | 'approval'
  | 'timeout'
  | 'cancelled'
  | 'unknown_tool';

/**
 * `tool.execute.exception`: an attempt failed. `reason` and `stack` are raw
 * and may hold secrets (an API key in a message): run {@link scrub} before
 * forwarding the event off-box.
 */
export interface ToolExceptionEvent extends ToolEventBase {
  readonly kind: ToolFailureKind;
  readonly willRetry: boolean;
  readonly reason: unknown;
  readonly stack: string | undefined;
}

/** `tool.execute.timeout`: an attempt overran `timeoutMs` (terminal). */
export interface ToolTimeoutEvent extends ToolEventBase {
  readonly timeoutMs: number;
}

/** `tool.approval.invalid`: the approval handler returned something that is not a decision; the call was denied. */
export interface ApprovalInvalidEvent extends ToolEventBase {
  readonly received: string;
}

/**
 * `context.operation_dropped`: a tool returned an update with an operation
 * Troupe will not apply (a key it owns): the operation was dropped, the rest
 * of the update applied.
 */
export interface OperationDroppedEvent extends ToolEventBase {
  readonly op: string;
  readonly key: string | undefined;
  readonly reason: string;
}

/** The tool telemetry event map (eventemitter3 style: event name → listener arguments). */
export interface ToolEvents {
  'tool.execute.start': [ToolStartEvent];
  'tool.execute.stop': [ToolStopEvent];
  'tool.execute.exception': [ToolExceptionEvent];
  'tool.execute.timeout': [ToolTimeoutEvent];
  'tool.approval.invalid': [ApprovalInvalidEvent];
  'context.operation_dropped': [OperationDroppedEvent];
}

/** A `tool.execute.exception` event without its raw reason and stack. */
export type ScrubbedToolExceptionEvent = Omit<ToolExceptionEvent, 'reason' | 'stack'> & {
  readonly reason: undefined;
  readonly stack: undefined;
  /** The error's name and code only, never its message. */
  readonly errorName: string | undefined;
  readonly errorCode: string | undefined;
};

/**
 * Strip the raw `reason` and `stack` from an exception event before an
 * exporter (Sentry, a log shipper) sends it off-box. Keeps the error's name
 * and code, never its message.
 */
export function scrub(event: ToolExceptionEvent): ScrubbedToolExceptionEvent {
  const reason = event.reason as { name?: unknown; code?: unknown } | undefined;
  return {
    ...event,
    reason: undefined,
    stack: undefined,
    errorName: typeof reason?.name === 'string' ? reason.name : undefined,
    errorCode: typeof reason?.code === 'string' ? reason.code : undefined,
  };
}

/** The part of an eventemitter3 emitter the executor needs. */
export interface ToolEventSink {
  emit<K extends keyof ToolEvents>(event: K, ...args: ToolEvents[K]): boolean;
  listenerCount(event: keyof ToolEvents): number;
}
