// Shared setup of the hostile-worker suite: a supervisor whose approval
// handler records what it was asked, the boundary events it emitted, and a
// process-wide count of uncaught errors and unhandled rejections.
import type { ApprovalDecision, ApprovalRequest } from '@troupe/core';
import { createSupervisor, type Supervisor, type SupervisorEvents, type SupervisorOptions } from '@troupe/supervisor';

/** Uncaught exceptions and unhandled rejections in this process since it loaded this module. */
export const processFaults: { uncaught: unknown[]; unhandled: unknown[] } = { uncaught: [], unhandled: [] };
const faultWaiters: ((fault: unknown) => void)[] = [];
process.on('uncaughtException', (error) => {
  processFaults.uncaught.push(error);
  for (const resolve of faultWaiters.splice(0)) resolve(error);
});
process.on('unhandledRejection', (reason) => {
  processFaults.unhandled.push(reason);
  for (const resolve of faultWaiters.splice(0)) resolve(reason);
});

/** Resolves with the next uncaught exception or unhandled rejection (to race a promise that one would leave pending). */
export function nextFault(): Promise<unknown> {
  return new Promise((resolve) => faultWaiters.push(resolve));
}

export type Refusal = SupervisorEvents['host.refused'][0];
export type Recycle = SupervisorEvents['worker.recycled'][0];

export interface Hostile {
  readonly supervisor: Supervisor;
  /** What the approval handler was asked, in order. */
  readonly approvals: ApprovalRequest[];
  readonly refused: Refusal[];
  readonly recycled: Recycle[];
}

/**
 * A supervisor for hostile runs: the approval handler approves `bait`, decides
 * every other call with `others` (default: reject), and records every request.
 */
export async function hostileSupervisor(
  options: SupervisorOptions = {},
  others: (request: ApprovalRequest) => ApprovalDecision = () => ({ decision: 'reject', reason: 'no' }),
): Promise<Hostile> {
  const approvals: ApprovalRequest[] = [];
  const supervisor = createSupervisor({
    ...options,
    pool: { threads: 2, graceMs: 200, ...options.pool },
    approval: (request) => {
      approvals.push(request);
      return request.toolName === 'bait' ? { decision: 'approve' } : others(request);
    },
  });
  const refused: Refusal[] = [];
  const recycled: Recycle[] = [];
  supervisor.on('host.refused', (e) => refused.push(e));
  supervisor.on('worker.recycled', (e) => recycled.push(e));
  await supervisor.pool.ready();
  return { supervisor, approvals, refused, recycled };
}

/** A board for a hostile tool and a test to meet on (see `Board` in the fixture). */
export function newBoard(): Int32Array {
  return new Int32Array(new SharedArrayBuffer(4096));
}

/** Resolves once `board[index]` is no longer `from` (Atomics, no polling). */
export async function changed(board: Int32Array, index: number, from = 0): Promise<number> {
  // A waitAsync does not keep the event loop alive: this handle does (it never fires).
  const keepAlive = setInterval(() => {}, 2 ** 30);
  try {
    for (;;) {
      const r = Atomics.waitAsync(board, index, from);
      if (r.async) await r.value;
      const now = Atomics.load(board, index);
      if (now !== from) return now;
    }
  } finally {
    clearInterval(keepAlive);
  }
}

/**
 * `promise`, holding the event loop open until it settles: for what arrives
 * after a run has ended (the supervisor's ports and idle workers do not keep
 * a process alive, and the test runner would end the test as stuck).
 */
export async function alive<T>(promise: Promise<T>): Promise<T> {
  const keepAlive = setInterval(() => {}, 2 ** 30);
  try {
    return await promise;
  } finally {
    clearInterval(keepAlive);
  }
}

/** Resolves with the first event `name` for which `match` holds. */
export function nextEvent<K extends keyof SupervisorEvents>(
  supervisor: Supervisor,
  name: K,
  match: (e: SupervisorEvents[K][0]) => boolean = () => true,
): Promise<SupervisorEvents[K][0]> {
  return new Promise((resolve) => {
    const on = ((e: SupervisorEvents[K][0]) => {
      if (!match(e)) return;
      supervisor.off(name as keyof SupervisorEvents, on as never);
      resolve(e);
    }) as never;
    supervisor.on(name as keyof SupervisorEvents, on);
  });
}
