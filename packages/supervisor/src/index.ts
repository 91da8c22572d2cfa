/**
 * @troupe/supervisor — the public face of Troupe: the supervisor, its pool
 * of worker threads, the cancellation table and watchdog, approval routing,
 * human-in-the-loop requests, persistence adapters and lifecycle.
 */

export { systemClock } from '@troupe/subagent';
export type { AgentHandle, AgentReply, AgentSnapshot, AgentStatus } from './AgentHandle.js';
export {
  CancellationTable,
  type CancellationTableOptions,
  type ExpiredEntry,
  type RegisteredSlot,
  type RegisterOptions,
} from './CancellationTable.js';
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
export { admitRestart, checkRestartPolicy, DEFAULT_RESTART_POLICY, type RestartPolicy } from './RestartPolicy.js';
export type { SubagentOutcome } from './SubagentOutcome.js';
export {
  type RunHost,
  type SpawnSpec,
  SubagentPool,
  type SubagentPoolOptions,
  type SubagentPoolStats,
} from './SubagentPool.js';
export {
  createSupervisor,
  type PendingRequestInfo,
  type StartAgentOptions,
  Supervisor,
  type SupervisorOptions,
  type SupervisorStats,
} from './Supervisor.js';
export type { ChannelBytes, SupervisorEvents } from './SupervisorEvents.js';
export { Watchdog, type WatchdogKillCause, type WatchdogOptions } from './Watchdog.js';
