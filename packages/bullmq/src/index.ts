/**
 * @troupe/bullmq — Troupe past one machine: subagent attempts run on worker
 * hosts through BullMQ on Redis 7, behind the supervisor's `RunTransport`.
 * The API host (`createSupervisor({ transport: bullmqTransport(...) })`) keeps
 * the run tree, parent agents, approval and the store; worker hosts
 * (`startWorkerHost`, the `troupe-worker` command) run the subagent runtime on
 * their own threads. Cancel, questions, host death and version skew are
 * handled across hosts.
 */

export {
  type BullmqTransportOptions,
  type ResolvedBullmqTransportOptions,
  resolveBullmqTransportOptions,
} from './BullmqTransportOptions.js';
export {
  BullmqTransport,
  bullmqTransport,
} from './bullmqTransport.js';
export {
  AttemptLostError,
  ClusterError,
  RedisConfigError,
  RedisUnreachableError,
  VersionSkewError,
} from './ClusterError.js';
export {
  startWorkerHost,
  WorkerHost,
  type WorkerHostEvents,
  type WorkerHostStats,
} from './startWorkerHost.js';
export {
  type AgentModuleRef,
  type ResolvedWorkerHostOptions,
  resolveWorkerHostOptions,
  type WorkerHostOptions,
} from './WorkerHostOptions.js';
