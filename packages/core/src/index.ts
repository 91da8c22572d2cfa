/**
 * @troupe/core — the pure heart of Troupe: the three context channels, the
 * `ContextUpdate` reducer, tools and their executor, cancellation tokens, the
 * agent loop's types and errors: what an application writes agents and
 * tools with. No threads, no timers, no I/O. The runtime's own parts (the
 * worker protocol, the host channel, the cancellation buffer's layout, the
 * loop and the executor the runtime drives) are in `@troupe/core/internal`.
 */

// First: refuse an unsupported Node.js before anything else runs.
import './internal/assertSupportedNode.js';

export {
  type Agent,
  type AgentDefinition,
  DEFAULT_MAX_TURNS,
  defineAgent,
  isAgent,
  type OutputOf,
} from './Agent.js';
export { type AgentOutput, DEFAULT_OUTPUT_RETRIES, OUTPUT_NAME } from './AgentOutput.js';
export { assertCloneable, findUncloneable, isCloneable } from './assertCloneable.js';

export { CancelSource } from './CancelSource.js';
export {
  type CallCancellation,
  type CallInfo,
  type CancelToken,
  neverCancelled,
  type RunCancellation,
} from './CancelToken.js';
export type { Clock, TimerHandle } from './Clock.js';
export {
  type AppliedUpdate,
  applyContextUpdate,
  assertJson,
  ContextUpdate,
  type EventsDropped,
  type FindNotJsonOptions,
  findNotJson,
  isProtectedKey,
  type Metadata,
  type NotJson,
  type Operation,
  PROTECTED_KEY_PREFIX,
  type ReduceOptions,
  reduceMetadata,
  type SessionEvent,
  TRANSCRIPT_EVENT_TYPES,
  type UpdateTarget,
} from './ContextUpdate.js';

export { ApprovalDecision, type ApprovalHandler, type ApprovalRequest } from './executeTool.js';

export {
  type AgentId,
  type Branded,
  createId,
  type IdKind,
  type RequestId,
  type RunId,
  type ToolCallId,
} from './Id.js';
export type { LoopEnd } from './LoopEnd.js';
export { type LoopState, totalUsage } from './LoopState.js';
export type {
  AssistantMessage,
  Message,
  Model,
  ModelCallInfo,
  ModelDelta,
  ModelRequest,
  ModelResponse,
  ModelToolCall,
  Todo,
  ToolMessage,
} from './Model.js';
export type { ModelErrorEvent, ModelEventBase, ModelEvents, ModelStartEvent, ModelStopEvent } from './ModelEvents.js';
export type { ModelFactory } from './ModelFactory.js';
export type { OutputSpec } from './OutputSpec.js';

export { Answer, Request } from './Request.js';
export {
  assertScopeBudget,
  checkBudget,
  DEFAULT_SCOPE_BUDGET_BYTES,
  type DeepReadonly,
  deepFreeze,
  defineScope,
  isDeepFrozen,
  type Scope,
  type ScopeDefinition,
  type ScopeOf,
  type ScopeOptions,
  sealScope,
  serializedSize,
} from './Scope.js';

export { TASK_TOOL_NAME, type TaskRequest, type TaskResult } from './TaskTool.js';
export {
  type AnyTool,
  DEFAULT_TOOL_RETRIES,
  DEFAULT_TOOL_TIMEOUT_MS,
  defineTool,
  type Tool,
  type ToolDefinition,
  type ToolReturn,
  type ToolSpec,
} from './Tool.js';
export {
  type AgentStateView,
  RESERVED_CONTEXT_KEYS,
  type ReservedToolContext,
  type ToolContext,
} from './ToolContext.js';
export type {
  ApprovalInvalidEvent,
  OperationDroppedEvent,
  ToolEventBase,
  ToolEventSink,
  ToolEvents,
  ToolExceptionEvent,
  ToolFailureKind,
  ToolStartEvent,
  ToolStopEvent,
  ToolTimeoutEvent,
} from './ToolEvents.js';
export { asError, type RequestInput, ToolResult } from './ToolResult.js';
export {
  BackpressureError,
  CancelledError,
  type CancelReason,
  ClosedError,
  type ErrorCode,
  InvalidArgumentError,
  isTroupeError,
  ToolTimeoutError,
  TroupeError,
  type TroupeErrorOptions,
  WorkerCrashedError,
} from './TroupeError.js';
export { addUsage, isUsage, NO_USAGE, subtractUsage, type Usage, usageEquals } from './Usage.js';
