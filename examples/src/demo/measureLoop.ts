import { monitorEventLoopDelay, performance } from 'node:perf_hooks';

/** What running something cost this thread's event loop. */
export interface LoopCost<T> {
  readonly value: T;
  /** Wall time of the work. */
  readonly wallMs: number;
  /** The longest this thread's event loop could not run a timer meanwhile. */
  readonly maxDelayMs: number;
  /** CPU time the whole process (every thread) spent meanwhile. */
  readonly cpuMs: number;
  /**
   * The share of the time this thread's event loop was running code rather
   * than waiting for events (0–1). Unlike the longest delay it does not count
   * the time the OS gave the thread's CPU to someone else while it waited.
   */
  readonly busyShare: number;
}

/** CPU time of the process so far (user + system, every thread), in ms. */
export function cpuNow(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

const RESOLUTION_MS = 5;

/**
 * Run `work` and measure how long it took, the CPU time it cost, and how
 * long, at most, the event loop of this thread was held (a timer due every
 * few ms that could not fire): what a request, a timer or a redraw would
 * have waited.
 */
export async function measureLoop<T>(work: () => Promise<T>): Promise<LoopCost<T>> {
  const histogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  histogram.enable();
  // The histogram's timer must have fired once: a loop held before that records nothing.
  await new Promise((resolve) => setTimeout(resolve, RESOLUTION_MS * 2));
  const c0 = cpuNow();
  const e0 = performance.eventLoopUtilization();
  const t0 = performance.now();
  const value = await work();
  const wallMs = performance.now() - t0;
  const busyShare = performance.eventLoopUtilization(e0).utilization;
  const cpuMs = cpuNow() - c0;
  // Let the histogram's timer fire once more: a loop held until now records its delay when it runs again.
  await new Promise((resolve) => setTimeout(resolve, RESOLUTION_MS * 2));
  histogram.disable();
  // The histogram counts the timer's own period in; take it out.
  return { value, wallMs, cpuMs, busyShare, maxDelayMs: Math.max(0, histogram.max / 1e6 - RESOLUTION_MS) };
}
