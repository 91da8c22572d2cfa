/**
 * @troupe/core — the pure heart of Troupe: the three context channels, the
 * `ContextUpdate` reducer, tools and their executor, cancellation tokens, the
 * agent loop, errors and the supervisor⇄worker protocol. No threads, no
 * timers, no I/O: effects come in through an injected `Clock` and tokens.
 */

// First: refuse an unsupported Node.js before anything else runs.
import './internal/assertSupportedNode.js';

export { type Agent, type AgentDefinition, DEFAULT_MAX_TURNS, defineAgent, findAgentExport, isAgent } from './Agent.js';
export {
  abandonPendingTurn,
  addUsage,
  type CheckpointCall,
  DEFAULT_MAX_FAILED_TURNS,
  initialLoopState,
  type LoopEventSink,
  type LoopEvents,
  type LoopOutcome,
  type LoopState,
  openCalls,
  type PendingCall,
  type RunAgentLoopOptions,
  renameRequest,
  resolveDelegatedCall,
  runAgentLoop,
  type TurnCheckpoints,
  totalUsage,
} from './AgentLoop.js';
export { assertCloneable, cloneableSizeBound, findUncloneable, irregularKeys, isCloneable } from './assertCloneable.js';
export { CancelSlots, type CancelSlotsOptions, type SlotHandle } from './CancelSlots.js';
export { CancelSource, localRunCancellation } from './CancelSource.js';
export {
  type CallCancellation,
  type CallInfo,
  type CancelCell,
  type CancelToken,
  neverCancelled,
  onCancelled,
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
export { decodeError, ErrorShape, encodeError } from './ErrorShape.js';
export {
  ApprovalDecision,
  type ApprovalHandler,
  type ApprovalRequest,
  type ExecuteToolOptions,
  executeTool,
  type ToolCallInput,
  type ToolExecution,
} from './executeTool.js';
export {
  type HostCall,
  type HostCallWire,
  type HostCheckpoint,
  type HostEvent,
  HostOp,
  type HostReplyWire,
  MAX_HOST_EVENTS,
  parseHostCall,
  parseHostCheckpoint,
  parseHostEvents,
  parseHostReply,
  TELEMETRY_EVENTS,
} from './HostProtocol.js';
export {
  type AgentId,
  type Branded,
  createId,
  type IdKind,
  type RequestId,
  type RunId,
  subagentId,
  type ToolCallId,
} from './Id.js';
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
  Usage,
} from './Model.js';
export type { ModelErrorEvent, ModelEventBase, ModelEvents, ModelStartEvent, ModelStopEvent } from './ModelEvents.js';
export {
  AgentRef,
  CAPABILITY_LENGTH,
  decodeSubagentResult,
  decodeSubagentTask,
  encodeSubagentResult,
  encodeSubagentTask,
  HOST_OPEN,
  HostApprovalRequest,
  HostFeature,
  HostTaskRequest,
  HostTaskResult,
  isCapability,
  isUsage,
  PROTOCOL_VERSION,
  parseHostTaskRequest,
  type SubagentResult,
  type SubagentTask,
  type SubagentTaskWire,
  TaskFlag,
  TaskSlot,
  WORKER_READY,
} from './Protocol.js';
export { Answer, Request } from './Request.js';
export {
  assertScopeBudget,
  checkBudget,
  DEFAULT_SCOPE_BUDGET_BYTES,
  type DeepReadonly,
  deepFreeze,
  defineScope,
  freezeReceived,
  isDeepFrozen,
  type Scope,
  type ScopeDefinition,
  type ScopeOf,
  type ScopeOptions,
  sealScope,
  serializedBytes,
  serializedSize,
  serializedSizeAtMost,
} from './Scope.js';
export {
  type SlotRunCancellation,
  type SlotRunCancellationOptions,
  slotRunCancellation,
} from './slotRunCancellation.js';
export { createTaskTool, TASK_TOOL_NAME, type TaskRequest, type TaskResult, type TaskSpawner } from './TaskTool.js';
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
  buildToolContext,
  type CallContext,
  RESERVED_CONTEXT_KEYS,
  type ReservedToolContext,
  type RunContext,
  type ToolContext,
} from './ToolContext.js';
export {
  type ApprovalInvalidEvent,
  type OperationDroppedEvent,
  type ScrubbedToolExceptionEvent,
  scrub,
  type ToolEventBase,
  type ToolEventSink,
  type ToolEvents,
  type ToolExceptionEvent,
  type ToolFailureKind,
  type ToolStartEvent,
  type ToolStopEvent,
  type ToolTimeoutEvent,
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
