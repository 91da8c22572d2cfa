/**
 * @troupe/core/internal — the runtime's own parts, shared by
 * `@troupe/supervisor` and `@troupe/subagent`: the supervisor⇄worker task
 * protocol, the host channel's wire format, the cancellation buffer and its
 * slot layout, the agent loop and the tool executor as the runtime drives
 * them, and the wire form of errors. Not for applications: these change with
 * the runtime, without a major version.
 *
 * @packageDocumentation
 */

// First: refuse an unsupported Node.js before anything else runs.
import './assertSupportedNode.js';

export { findAgentExport } from '../Agent.js';
export { runAgentLoop } from '../AgentLoop.js';
export { cloneableSizeBound, irregularKeys } from '../assertCloneable.js';
export { CancelSlots, type CancelSlotsOptions, type SlotHandle } from '../CancelSlots.js';
export { localRunCancellation } from '../CancelSource.js';
export { type CancelCell, onCancelled } from '../CancelToken.js';
export { decodeError, ErrorShape, encodeError } from '../ErrorShape.js';
export {
  type ExecuteToolOptions,
  executeTool,
  NO_APPROVAL_HANDLER,
  type ToolCallInput,
  type ToolExecution,
} from '../executeTool.js';
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
  telemetryBit,
} from '../HostProtocol.js';
export { subagentId } from '../Id.js';
export { endOfLoop } from '../LoopEnd.js';
export type { LoopEventSink, LoopEvents } from '../LoopEvents.js';
export {
  abandonPendingTurn,
  initialLoopState,
  type LoopOutcome,
  openCalls,
  type PendingCall,
  renameRequests,
  resolveDelegatedCall,
  resolvedCall,
  sealMessage,
} from '../LoopState.js';
export {
  AgentRef,
  CAPABILITY_LENGTH,
  decodeSubagentResult,
  decodeSubagentTask,
  encodeSubagentFailure,
  encodeSubagentResult,
  encodeSubagentTask,
  findBadPending,
  findUnwalkable,
  HOST_OPEN,
  HostApprovalRequest,
  HostFeature,
  HostTaskRequest,
  HostTaskResult,
  isCapability,
  KEPT_SCOPES,
  KeptScopes,
  PROTOCOL_VERSION,
  parseHostTaskRequest,
  ResultSlot,
  type SubagentEnd,
  type SubagentTask,
  type SubagentTaskWire,
  TaskFlag,
  TaskSlot,
  TELEMETRY_SHIFT,
  WORKER_READY,
} from '../Protocol.js';
export { freezeReceived, serializedBytes, serializedSizeAtMost } from '../Scope.js';
export {
  type SlotRunCancellation,
  type SlotRunCancellationOptions,
  slotRunCancellation,
} from '../slotRunCancellation.js';
export { createTaskTool, DEFERRED_TASK_KIND, type TaskSpawner } from '../TaskTool.js';
export { buildToolContext, type CallContext, type RunContext } from '../ToolContext.js';
export { type ScrubbedToolExceptionEvent, scrub } from '../ToolEvents.js';
export { describeValue } from './describeValue.js';
export { formatBytes } from './formatBytes.js';
export { keepAliveClock } from './keepAliveClock.js';
export { DEFAULT_MAX_FAILED_TURNS, type ResumeAnswer, type RunAgentLoopOptions } from './RunAgentLoopOptions.js';
export type { CheckpointCall, TurnCheckpoints } from './TurnCheckpoints.js';
