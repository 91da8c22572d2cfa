// The demo's instrument panel: a few counters and timestamps in shared memory
// that the host passes in `toolContext.probe`. Structured clone shares a
// SharedArrayBuffer instead of copying it, so the host watches a tool inside a
// worker with Atomics (no message, no polling) — the way the tests
// synchronise, never by sleeping.
import { performance } from 'node:perf_hooks';
import type { ToolContext } from '@troupe/core';

/** Which counter means what. */
export const Probe = Object.freeze({
  /** The runaway tool entered its loop. */
  crunchStarted: 0,
  /** The polite tool entered its loop. */
  pollStarted: 1,
  /** The polite tool saw the cancel (its time is in stamp `pollNoticed` too). */
  pollNoticed: 2,
  /** Runs of the deploy tool (it asks first, then runs again with the answer). */
  deployRuns: 3,
  /** Runs of the refund tool past its approval. */
  refundRuns: 4,
});

const COUNTERS = 8;
const STAMPS_OFFSET = COUNTERS * Int32Array.BYTES_PER_ELEMENT;
const STAMPS = COUNTERS;

/**
 * Epoch milliseconds with sub-microsecond resolution, in a base every thread
 * of the process shares (a worker's `performance.now()` has its own origin).
 */
export const sharedNow = (): number => performance.timeOrigin + performance.now();

/** What a tool that reports to the probe reads: `toolContext.probe`, when the host passed one. */
export type ProbeContext = ToolContext<unknown, { readonly probe?: Int32Array }>;

/** A fresh probe to pass as `toolContext.probe`: Int32 counters, then one Float64 stamp per counter. */
export function createProbe(): Int32Array {
  const buffer = new SharedArrayBuffer(STAMPS_OFFSET + STAMPS * Float64Array.BYTES_PER_ELEMENT);
  return new Int32Array(buffer, 0, COUNTERS);
}

/** The time a tool stamped for counter `index` ({@link sharedNow} base; 0 if never). */
export function stampOf(probe: Int32Array, index: number): number {
  return new Float64Array(probe.buffer, STAMPS_OFFSET, STAMPS)[index] ?? 0;
}

/**
 * Stamp the time for counter `index`, bump it and wake its waiters — if the
 * host passed a probe. The stamp is written before the atomic add, so a host
 * that sees the counter move reads the stamp too.
 */
export function bump(ctx: ProbeContext, index: number): void {
  const probe = ctx.toolContext.probe;
  if (!(probe instanceof Int32Array)) return;
  new Float64Array(probe.buffer, STAMPS_OFFSET, STAMPS)[index] = sharedNow();
  Atomics.add(probe, index, 1);
  Atomics.notify(probe, index);
}
