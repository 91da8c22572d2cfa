import { InvalidArgumentError } from '@troupe/core';
import { describeValue } from '@troupe/core/internal';

/**
 * Restart intensity for parent agents, each on its own: an agent whose
 * run fails is restarted from its last saved state, unless it has already
 * been restarted `maxRestarts` times within the last `periodMs` — then it is
 * stopped, and an `agent.stopped` event says why.
 *
 * @example
 * ```ts
 * const policy: RestartPolicy = { maxRestarts: 5, periodMs: 60_000 }
 * const supervisor = createSupervisor({ restart: policy })
 * supervisor.on('agent.stopped', (e) => console.warn(`${e.agentId} stopped: ${e.reason}`))
 * ```
 */
export interface RestartPolicy {
  readonly maxRestarts: number;
  readonly periodMs: number;
}

/**
 * Default: 3 restarts within 5 seconds (agents fail more often than most services: a model errs, a tool times out).
 *
 * @example
 * ```ts
 * const supervisor = createSupervisor({ restart: { ...DEFAULT_RESTART_POLICY, maxRestarts: 1 } })
 * ```
 */
export const DEFAULT_RESTART_POLICY: RestartPolicy = Object.freeze({ maxRestarts: 3, periodMs: 5000 });

/** Validate a restart policy at the edge. */
export function checkRestartPolicy(policy: Partial<RestartPolicy> | undefined): RestartPolicy {
  if (policy !== undefined && (typeof policy !== 'object' || policy === null || Array.isArray(policy))) {
    throw new InvalidArgumentError(`restart must be { maxRestarts, periodMs }, got ${describeValue(policy)}`);
  }
  for (const key of Object.keys(policy ?? {})) {
    if (key !== 'maxRestarts' && key !== 'periodMs') {
      throw new InvalidArgumentError(`restart: unknown option "${key}"; pass { maxRestarts, periodMs }`);
    }
  }
  const p = { ...DEFAULT_RESTART_POLICY, ...policy };
  if (!Number.isSafeInteger(p.maxRestarts) || p.maxRestarts < 0) {
    throw new InvalidArgumentError(
      `restart.maxRestarts must be a non-negative integer, got ${describeValue(p.maxRestarts)}`,
    );
  }
  if (!Number.isFinite(p.periodMs) || p.periodMs <= 0) {
    throw new InvalidArgumentError(
      `restart.periodMs must be a positive number of ms, got ${describeValue(p.periodMs)}`,
    );
  }
  return Object.freeze(p);
}

/**
 * Record a failure at `now` in `history` (restart times, oldest first, kept
 * within the period) and say whether the agent may restart.
 */
export function admitRestart(policy: RestartPolicy, history: number[], now: number): boolean {
  while (history.length > 0 && (history[0] as number) <= now - policy.periodMs) history.shift();
  if (history.length >= policy.maxRestarts) return false;
  history.push(now);
  return true;
}
