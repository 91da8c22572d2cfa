// The CPU work every peer's tool does: a deterministic integer loop (no sleeps, no I/O), the
// same iteration count everywhere, calibrated once on this thread so one unit lasts ~N ms.
import { performance } from 'node:perf_hooks';

/** `iterations` steps of a 32-bit LCG; returns the last value so the loop cannot be elided. */
export function burn(iterations: number): number {
  let x = 1;
  for (let i = 0; i < iterations; i++) x = (Math.imul(x, 1664525) + 1013904223) | 0;
  return x;
}

/** Iterations of {@link burn} that take about `ms` on this thread (the median of five tries). */
export function calibrate(ms: number): number {
  burn(5_000_000);
  const probe = 2_000_000;
  const tries: number[] = [];
  for (let i = 0; i < 5; i++) {
    const start = performance.now();
    burn(probe);
    tries.push(performance.now() - start);
  }
  tries.sort((a, b) => a - b);
  const perIteration = (tries[2] as number) / probe;
  return Math.max(1, Math.round(ms / perIteration));
}

/** Milliseconds since the epoch, comparable across threads (sub-ms resolution). */
export function epochMs(): number {
  return performance.timeOrigin + performance.now();
}

/** Iterations of {@link burn} between two cancellation checks of a checking tool. */
export const CHECK_EVERY = 1_000;

/**
 * A CPU-bound tool body that checks `cancelled()` before each {@link CHECK_EVERY} iterations:
 * runs `iterations` in all unless cancelled; reports when it stopped and whether it saw the cancel.
 */
export function burnChecking(iterations: number, cancelled: () => boolean): { stoppedAt: number; sawCancel: boolean } {
  for (let done = 0; done < iterations; done += CHECK_EVERY) {
    if (cancelled()) return { stoppedAt: epochMs(), sawCancel: true };
    burn(CHECK_EVERY);
  }
  return { stoppedAt: epochMs(), sawCancel: false };
}
