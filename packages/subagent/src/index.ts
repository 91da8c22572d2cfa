/**
 * @troupe/subagent — the worker side of Troupe: the piscina task entry
 * (`@troupe/subagent/worker`) that loads an agent module, rebuilds its
 * context, bridges its cancellation slot and runs its loop.
 */
export { systemClock } from './systemClock.js';
