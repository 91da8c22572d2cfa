/**
 * @troupe/supervisor/internal — the parts under the public surface, for
 * Troupe's own tests and benchmarks: the cancellation table, the watchdog,
 * the run tree and its transport. Not a stable API.
 */

export {
  CancellationTable,
  type CancellationTableOptions,
  type ExpiredEntry,
  type RegisteredSlot,
  type RegisterOptions,
  type Segment,
} from '../CancellationTable.js';
export { admitRestart, checkRestartPolicy } from '../RestartPolicy.js';
export { RunTree, type RunTreeOptions } from '../RunTree.js';
export { Watchdog, type WatchdogKillCause, type WatchdogOptions } from '../Watchdog.js';
export { mintCapability } from './capability.js';
export { Dispatcher } from './Dispatcher.js';
export {
  HostChannel,
  type HostChannelOptions,
  type HostLookup,
  type HostPeer,
  type HostRefusal,
  type HostReply,
  type HostRun,
  MAX_QUESTIONS_PER_DISPATCH,
} from './HostChannel.js';
export { quantile } from './quantile.js';
export type { RunNode, RunPhase } from './RunNode.js';
export { type ThreadInfo, WorkerPool } from './WorkerPool.js';
