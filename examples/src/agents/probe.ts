// The demo's instrument panel: a few Int32 counters in shared memory that the
// host passes in `toolContext.probe`. Structured clone shares a
// SharedArrayBuffer instead of copying it, so the host watches a tool inside a
// worker with Atomics (no message, no polling of the event loop) — the way the
// tests synchronise, never by sleeping.

/** Which counter means what. */
export const Probe = Object.freeze({
  /** The runaway tool entered its loop. */
  crunchStarted: 0,
  /** The polite tool entered its loop. */
  pollStarted: 1,
  /** The polite tool saw the cancel. */
  pollNoticed: 2,
  /** Runs of the deploy tool (it asks first, then runs again with the answer). */
  deployRuns: 3,
  /** Runs of the refund tool past its approval. */
  refundRuns: 4,
  /** Number of counters. */
  size: 5,
});

/** A fresh probe to pass as `toolContext.probe`. */
export function createProbe(): Int32Array {
  return new Int32Array(new SharedArrayBuffer(Probe.size * Int32Array.BYTES_PER_ELEMENT));
}

/** Bump counter `index` of the probe in `ctx.toolContext`, if the host passed one, and wake its waiters. */
export function bump(ctx: { readonly toolContext: Readonly<Record<string, unknown>> }, index: number): void {
  const probe = ctx.toolContext.probe;
  if (!(probe instanceof Int32Array)) return;
  Atomics.add(probe, index, 1);
  Atomics.notify(probe, index);
}
