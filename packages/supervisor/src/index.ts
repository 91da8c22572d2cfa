/**
 * @troupe/supervisor — the public face of Troupe: the supervisor, its pool,
 * the cancellation table and watchdog, approval routing and lifecycle.
 */
export { systemClock } from '@troupe/subagent';
