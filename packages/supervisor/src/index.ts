/**
 * @troupe/supervisor — the public face of Troupe: the supervisor, its pool,
 * the cancellation table and watchdog, approval routing and lifecycle.
 */
export { systemClock } from '@troupe/subagent';
export {
  CancellationTable,
  type CancellationTableOptions,
  type ExpiredEntry,
  type RegisteredSlot,
  type RegisterOptions,
} from './CancellationTable.js';
export { Watchdog, type WatchdogKillCause, type WatchdogOptions } from './Watchdog.js';
