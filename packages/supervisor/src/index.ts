/**
 * @troupe/supervisor — the public face of Troupe: the supervisor, its run
 * tree and pool of worker threads, approval routing, human-in-the-loop
 * requests, streaming, persistence adapters and lifecycle.
 */

export { systemClock } from '@troupe/subagent';
export type {
  AgentHandle,
  AgentReply,
  AgentSnapshot,
  AgentStatus,
  SendOptions,
  StreamChunk,
  StreamOptions,
} from './AgentHandle.js';
export {
  LocalTransport,
  type LocalTransportOptions,
  localTransport,
  type ResolvedLocalTransportOptions,
} from './LocalTransport.js';
export {
  MAX_MEASURED_HOPS,
  type MeasureScopeCostOptions,
  measureScopeCost,
  type ScopeCost,
  type ScopeCostQuantiles,
  type ScopeKeyCost,
} from './measureScopeCost.js';
export {
  DEFAULT_MAX_CONVERSATIONS,
  MemoryPersistence,
  type MemoryPersistenceOptions,
} from './persistence/MemoryPersistence.js';
export {
  type AnswerResult,
  type ConversationSummary,
  DEFAULT_TENANT_KEY,
  isTerminalRunStatus,
  type ListOptions,
  type MarkInterruptedOptions,
  type Page,
  type PersistenceAdapter,
  type PersistenceContext,
  type PruneOptions,
  type PruneResult,
  type RequestListOptions,
  type RequestOpening,
  type RequestRecord,
  type RequestStatus,
  type RunKind,
  type RunRecord,
  type RunStatus,
  TERMINAL_RUN_STATUSES,
  type TenantKey,
  type ToolCallKey,
  type ToolCallRecord,
  type ToolCallStart,
  type TurnBatch,
  type WithdrawResult,
} from './persistence/Persistence.js';
export { PersistenceRules } from './persistence/PersistenceRules.js';
export {
  type AgentStateEnvelope,
  type AgentStateEnvelopeV1,
  type AnyAgentStateEnvelope,
  type ConversationStatus,
  type MessageStartRecord,
  migrateEnvelope,
  type PendingRequestRecord,
  READABLE_STATE_VERSIONS,
  STATE_ENVELOPE_VERSION,
} from './persistence/StateEnvelope.js';
export { DEFAULT_RESTART_POLICY, type RestartPolicy } from './RestartPolicy.js';
export type {
  Attempt,
  AttemptEnd,
  AttemptHandle,
  AttemptPlacement,
  AttemptWork,
  HostOperations,
  RunEnd,
  RunTransport,
  TransportHost,
  TransportStats,
} from './RunTransport.js';
export type { SubagentOutcome } from './SubagentOutcome.js';
export { createSupervisor, Supervisor } from './Supervisor.js';
export type {
  ChannelBytes,
  HostRefusedEvent,
  RunModel,
  RunPlacement,
  RunRef,
  RunUsage,
  SupervisorEvents,
  WorkerRecycledEvent,
} from './SupervisorEvents.js';
export type {
  AgentFor,
  AnswerOptions,
  AnswerOptionsFor,
  PendingRequestInfo,
  PoolOptions,
  SpawnOptions,
  SpawnOptionsFor,
  StartAgentOptions,
  StartAgentOptionsFor,
  SupervisorOptions,
  SupervisorStats,
} from './SupervisorOptions.js';
