import type { AgentId, ToolCallId } from './Id.js';

/**
 * Fields common to every tool telemetry event.
 *
 * @example
 * ```ts
 * const where = (e: ToolEventBase) => `${e.agentId} ${e.toolName}#${e.attempt} (${e.toolCallId})`
 * supervisor.on('tool.execute.start', (e) => console.log(where(e)))
 * ```
 */
export interface ToolEventBase {
  readonly toolName: string;
  readonly toolCallId: ToolCallId;
  readonly agentId: AgentId;
  readonly attempt: number;
  /** When it happened, in the `Clock` base. */
  readonly at: number;
}

/**
 * `tool.execute.start`: an attempt begins.
 *
 * @example
 * ```ts
 * supervisor.on('tool.execute.start', (e: ToolStartEvent) => console.log(`${e.toolName} attempt ${e.attempt}`))
 * ```
 */
export type ToolStartEvent = ToolEventBase;

/**
 * `tool.execute.stop`: the call ended (after its last attempt).
 *
 * @example
 * ```ts
 * supervisor.on('tool.execute.stop', (e: ToolStopEvent) => console.log(`${e.toolName}: ${e.status} in ${e.durationMs} ms`))
 * ```
 */
export interface ToolStopEvent extends ToolEventBase {
  readonly durationMs: number;
  readonly status: 'ok' | 'error' | 'pending';
  /** Why an `error` ended it: thrown, returned, validation, approval, timeout, cancelled, unknown_tool. */
  readonly failure?: ToolFailureKind | undefined;
  /** What the approval handler decided, for a tool with `requiresApproval`. */
  readonly approval?: 'approved' | 'edited' | 'rejected' | 'asked' | 'pre-approved' | undefined;
}

/**
 * What kind of failure a `tool.execute.exception` reports.
 *
 * @example
 * ```ts
 * const retryable = (kind: ToolFailureKind) => kind === 'thrown'
 * supervisor.on('tool.execute.stop', (e) => {
 *   if (e.failure !== undefined && !retryable(e.failure)) console.warn(`${e.toolName}: ${e.failure}`)
 * })
 * ```
 */
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
 *
 * @example
 * ```ts
 * supervisor.on('tool.execute.exception', (e: ToolExceptionEvent) => {
 *   if (!e.willRetry) console.error(`${e.toolName} failed (${e.kind})`)
 * })
 * ```
 */
export interface ToolExceptionEvent extends ToolEventBase {
  readonly kind: ToolFailureKind;
  readonly willRetry: boolean;
  readonly reason: unknown;
  readonly stack: string | undefined;
}

/**
 * `tool.execute.timeout`: an attempt overran `timeoutMs` (terminal).
 *
 * @example
 * ```ts
 * supervisor.on('tool.execute.timeout', (e: ToolTimeoutEvent) => console.warn(`${e.toolName} overran ${e.timeoutMs} ms`))
 * ```
 */
export interface ToolTimeoutEvent extends ToolEventBase {
  readonly timeoutMs: number;
}

/**
 * `tool.approval.invalid`: the approval handler returned something that is not a decision; the call was denied.
 *
 * @example
 * ```ts
 * supervisor.on('tool.approval.invalid', (e: ApprovalInvalidEvent) => console.error(`approval handler returned ${e.received} for ${e.toolName}`))
 * ```
 */
export interface ApprovalInvalidEvent extends ToolEventBase {
  readonly received: string;
}

/**
 * `context.operation_dropped`: a tool returned an update with an operation
 * Troupe will not apply (a key it owns): the operation was dropped, the rest
 * of the update applied.
 *
 * @example
 * ```ts
 * supervisor.on('context.operation_dropped', (e: OperationDroppedEvent) => console.warn(`${e.toolName}: ${e.op} ${e.key}: ${e.reason}`))
 * ```
 */
export interface OperationDroppedEvent extends ToolEventBase {
  readonly op: string;
  readonly key: string | undefined;
  readonly reason: string;
}

/**
 * The tool telemetry event map (eventemitter3 style: event name → listener arguments).
 *
 * The supervisor emits them for tools at every depth, on its own thread.
 *
 * @example
 * ```ts
 * const names: (keyof ToolEvents)[] = ['tool.execute.start', 'tool.execute.stop']
 * for (const name of names) supervisor.on(name, (e) => console.log(name, e.toolName))
 * ```
 */
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

/**
 * The part of an eventemitter3 emitter the executor needs.
 *
 * The runtime passes its own emitter; implement it only to run the executor
 * outside a supervisor (a test).
 *
 * @example
 * ```ts
 * const seen: string[] = []
 * const sink: ToolEventSink = {
 *   emit<K extends keyof ToolEvents>(event: K, ...[e]: ToolEvents[K]) {
 *     seen.push(`${event} ${e.toolName}`)
 *     return true
 *   },
 *   listenerCount: () => 1,
 * }
 * ```
 */
export interface ToolEventSink {
  emit<K extends keyof ToolEvents>(event: K, ...args: ToolEvents[K]): boolean;
  listenerCount(event: keyof ToolEvents): number;
}
