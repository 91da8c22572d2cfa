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
  StreamChunk,
  StreamOptions,
} from './AgentHandle.js';
export {
  MAX_MEASURED_HOPS,
  type MeasureScopeCostOptions,
  measureScopeCost,
  type ScopeCost,
  type ScopeCostQuantiles,
  type ScopeKeyCost,
} from './measureScopeCost.js';
export {
  type AgentStateEnvelope,
  MemoryPersistence,
  type PendingRequestRecord,
  type PersistenceAdapter,
  type PersistenceContext,
  STATE_ENVELOPE_VERSION,
} from './Persistence.js';
export { DEFAULT_RESTART_POLICY, type RestartPolicy } from './RestartPolicy.js';
export type { SubagentOutcome } from './SubagentOutcome.js';
export {
  createSupervisor,
  type PendingRequestInfo,
  type PoolOptions,
  type SpawnOptions,
  type StartAgentOptions,
  Supervisor,
  type SupervisorOptions,
  type SupervisorStats,
} from './Supervisor.js';
export type {
  ChannelBytes,
  HostRefusedEvent,
  RunRef,
  RunUsage,
  SupervisorEvents,
  WorkerRecycledEvent,
} from './SupervisorEvents.js';
