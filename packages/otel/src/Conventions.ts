/**
 * The version of the OpenTelemetry semantic conventions every `gen_ai.*`
 * name below is taken from. The GenAI conventions are in development: keys
 * move between releases (`gen_ai.system` became `gen_ai.provider.name` in
 * 1.37.0; the cached and reasoning token counts arrived in 1.40.0 and
 * 1.41.0), so they are pinned here, in one file, and changed together.
 *
 * @example
 * ```ts
 * console.log(`gen_ai.* names of semantic conventions ${CONVENTIONS_VERSION}`)
 * ```
 */
export const CONVENTIONS_VERSION = '1.41.0';

/**
 * The span attribute keys of the GenAI semantic conventions (and the two
 * general ones) that the spans use, as of {@link CONVENTIONS_VERSION}.
 *
 * @example
 * ```ts
 * import type { ReadableSpan } from '@opentelemetry/sdk-trace-base'
 * import { GenAi } from '@troupe/otel'
 *
 * const tokens = (span: ReadableSpan) => span.attributes[GenAi.usageInputTokens]
 * ```
 */
export const GenAi = Object.freeze({
  operationName: 'gen_ai.operation.name',
  agentName: 'gen_ai.agent.name',
  agentId: 'gen_ai.agent.id',
  conversationId: 'gen_ai.conversation.id',
  providerName: 'gen_ai.provider.name',
  requestModel: 'gen_ai.request.model',
  responseModel: 'gen_ai.response.model',
  responseFinishReasons: 'gen_ai.response.finish_reasons',
  /** Seconds from the request to the first streamed chunk. */
  responseTimeToFirstChunk: 'gen_ai.response.time_to_first_chunk',
  usageInputTokens: 'gen_ai.usage.input_tokens',
  usageOutputTokens: 'gen_ai.usage.output_tokens',
  /** Part of the input tokens served from the provider's cache. */
  usageCacheReadInputTokens: 'gen_ai.usage.cache_read.input_tokens',
  /** Part of the output tokens spent reasoning. */
  usageReasoningOutputTokens: 'gen_ai.usage.reasoning.output_tokens',
  toolName: 'gen_ai.tool.name',
  toolCallId: 'gen_ai.tool.call.id',
  toolType: 'gen_ai.tool.type',
  /** Opt-in content: recorded only with `captureContent`. */
  toolCallArguments: 'gen_ai.tool.call.arguments',
  /** Opt-in content: recorded only with `captureContent`. */
  outputMessages: 'gen_ai.output.messages',
  errorType: 'error.type',
  threadId: 'thread.id',
} as const);

/**
 * The values of `gen_ai.operation.name` the spans use; each span is named
 * `{operation} {agent, tool or model}`.
 *
 * @example
 * ```ts
 * import type { ReadableSpan } from '@opentelemetry/sdk-trace-base'
 *
 * const isToolCall = (span: ReadableSpan) => span.attributes[GenAi.operationName] === GenAiOperation.executeTool
 * ```
 */
export const GenAiOperation = Object.freeze({
  invokeAgent: 'invoke_agent',
  executeTool: 'execute_tool',
  chat: 'chat',
} as const);

/**
 * Troupe's own span attribute and event names: what the GenAI conventions
 * have no key for (runs, retries, approvals, suspensions, the worker pool,
 * what a spawn copied).
 *
 * @example
 * ```ts
 * import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base'
 *
 * const exporter = new InMemorySpanExporter()
 * const suspended = exporter.getFinishedSpans().filter((s) => s.attributes[TroupeAttr.runStatus] === 'suspended')
 * ```
 */
export const TroupeAttr = Object.freeze({
  runId: 'troupe.run.id',
  /** `message` (a parent agent's message), `subagent` (a `task` call's child) or `spawn` (a direct spawn). */
  runKind: 'troupe.run.kind',
  /** How the run ended: `done`, `failed`, `crashed`, `cancelled`, `incomplete` or `suspended`. */
  runStatus: 'troupe.run.status',
  /** The run continues a suspended one (after an answer); its span links to the suspended span. */
  runResumed: 'troupe.run.resumed',
  runTurns: 'troupe.run.turns',
  parentAgentId: 'troupe.agent.parent_id',
  /** What the integrator's `tenant` hook made of the scope; never the scope itself. */
  tenant: 'troupe.tenant',
  /** From the run's (re)spawn to the moment a worker thread took it. */
  queueWaitMs: 'troupe.run.queue_wait_ms',
  cancelReason: 'troupe.cancel.reason',
  cancelForced: 'troupe.cancel.forced',
  exitCode: 'troupe.worker.exit_code',
  /** The request a suspended run waits on. */
  requestId: 'troupe.request.id',
  totalInputTokens: 'troupe.usage.total.input_tokens',
  totalOutputTokens: 'troupe.usage.total.output_tokens',
  scopeBytes: 'troupe.channel.scope.bytes',
  toolContextBytes: 'troupe.channel.tool_context.bytes',
  metadataBytes: 'troupe.channel.metadata.bytes',
  channelBytes: 'troupe.channel.total.bytes',
  /** Attempts the call made (0: it never ran — denied, invalid, asked, cancelled first). */
  toolAttempts: 'troupe.tool.attempts',
  /** `ok`, `error`, `timeout`, `cancelled` or `suspended`. */
  toolStatus: 'troupe.tool.status',
  /** Why an error ended it: thrown, returned, validation, approval, timeout, cancelled, unknown_tool. */
  toolFailure: 'troupe.tool.failure',
  /** The approval decision: approved, edited, rejected, asked, pre-approved. */
  toolApproval: 'troupe.tool.approval',
  toolTimeoutMs: 'troupe.tool.timeout_ms',
  toolWillRetry: 'troupe.tool.will_retry',
  modelTurn: 'troupe.model.turn',
  modelAttempts: 'troupe.model.attempts',
  modelToolCalls: 'troupe.model.tool_calls',
} as const);

/**
 * The span events the bridge adds to an `execute_tool` span.
 *
 * @example
 * ```ts
 * import type { ReadableSpan } from '@opentelemetry/sdk-trace-base'
 *
 * const retries = (span: ReadableSpan) => span.events.filter((e) => e.name === TroupeEvent.toolAttempt).length
 * ```
 */
export const TroupeEvent = Object.freeze({
  /** A retry of a tool call began (`troupe.tool.attempts` is its number). */
  toolAttempt: 'troupe.tool.attempt',
  /** An attempt failed (`error.type`, `troupe.tool.failure`, `troupe.tool.will_retry`). */
  toolAttemptFailed: 'troupe.tool.attempt_failed',
  /** The call overran its `timeoutMs` (terminal). */
  toolTimeout: 'troupe.tool.timeout',
} as const);
