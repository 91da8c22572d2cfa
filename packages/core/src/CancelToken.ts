import { CancelledError, type CancelReason } from './TroupeError.js';
import type { Usage } from './Usage.js';

/**
 * What code that can be cancelled reads. Backed either by the shared
 * cancellation table (one `Atomics.load`) or by an in-process source.
 *
 * - `isCancelled()` is cheap enough for a tight loop.
 * - `throwIfCancelled()` throws a {@link CancelledError} carrying the reason.
 * - `signal` aborts with that same `CancelledError`; hand it to `fetch` or a
 *   model call. It is created on first access, so code that never reads it
 *   pays nothing.
 *
 * @example
 * ```ts
 * async function fetchAll(urls: readonly string[], cancel: CancelToken): Promise<string[]> {
 *   const out: string[] = []
 *   for (const url of urls) {
 *     cancel.throwIfCancelled()
 *     out.push(await (await fetch(url, { signal: cancel.signal })).text())
 *   }
 *   return out
 * }
 * ```
 */
export interface CancelToken {
  isCancelled(): boolean;
  /** The reason once cancelled, else `undefined`. */
  readonly reason: CancelReason | undefined;
  throwIfCancelled(): void;
  readonly signal: AbortSignal;
  /**
   * Resolves with the reason when the token is cancelled; never settles if
   * it is not. One promise per token, made on first call. For racing a
   * promise against cancellation it is much cheaper than `signal`: no
   * `AbortController`, no `EventTarget` listener to add and remove (in a
   * worker, reading `signal` and listening on it cost ~12 µs; see
   * BENCHMARKS.md).
   */
  whenCancelled(): Promise<CancelReason>;
}

/**
 * A token for one tool call, opened from a {@link RunCancellation}.
 *
 * The runtime opens one per tool call; application code reads its `token`
 * (as `ctx.cancel`), it does not open or close calls.
 *
 * @example
 * ```ts
 * declare const run: RunCancellation
 * const call = run.openCall(undefined)
 * try {
 *   call.token.throwIfCancelled()
 * } finally {
 *   call.close()
 * }
 * ```
 */
export interface CallCancellation {
  readonly token: CancelToken;
  /** Cancel this call only (the executor's timeout uses reason `deadline`). */
  cancel(reason: CancelReason): void;
  /** The call ended: release what the token holds. Idempotent. */
  close(): void;
}

/**
 * What a call is, for whoever has to stop it by force and report it.
 *
 * @example
 * ```ts
 * const info: CallInfo = { toolIndex: 0, timeoutMs: 30_000 }
 * ```
 */
export interface CallInfo {
  /** The tool's index in its agent's `tools` (the built-in `task` tool comes after them). */
  readonly toolIndex: number;
  /** The call's timeout, if it has one. */
  readonly timeoutMs: number | undefined;
}

/**
 * The cancellation of one run: its own token, its absolute deadline (in the
 * `Clock` base) if any, and a way to open per-call tokens that are cancelled
 * with the run, or alone when the call times out.
 *
 * The runtime makes one per run (from the shared cancellation table or a
 * {@link CancelSource}); tools only see the call tokens it opens.
 *
 * @example
 * ```ts
 * declare const run: RunCancellation
 * const call = run.openCall(run.deadline, { toolIndex: 0, timeoutMs: undefined })
 * call.cancel('deadline') // this call only; the run goes on
 * call.close()
 * ```
 */
export interface RunCancellation {
  readonly token: CancelToken;
  readonly deadline: number | undefined;
  /** Open a call token; `deadline` (absolute) is what a watchdog enforces; `info` says what the call is. */
  openCall(deadline: number | undefined, info?: CallInfo): CallCancellation;
  /**
   * Cancel the run from inside it (a tool's `ctx.cancel()`): its token and
   * every call open under it read cancelled at once; the runtime stops what
   * runs under the run (its subagents) and ends it `cancelled`.
   */
  cancel(reason: CancelReason): void;
  /**
   * The run's own tokens so far, after each model call: where a run's thread
   * can die before it reports (a worker), its runtime keeps them where the
   * supervisor can still count them. Optional: a run on the supervisor's own
   * thread reports everything it spends.
   */
  noteUsage?(usage: Usage): void;
}

/**
 * A token that is never cancelled, for code called outside a run.
 *
 * Its `signal` is a fresh, never-aborted signal on each read.
 *
 * @example
 * ```ts
 * neverCancelled.isCancelled() // false
 * neverCancelled.throwIfCancelled() // never throws
 * ```
 */
export const neverCancelled: CancelToken = Object.freeze({
  isCancelled: () => false,
  reason: undefined,
  throwIfCancelled: () => {},
  // A new promise each time, never settled: what is chained on it goes with it,
  // where one shared module-level promise would keep every reaction for good.
  whenCancelled: () => new Promise<CancelReason>(() => {}),
  get signal(): AbortSignal {
    return new AbortController().signal;
  },
});

/**
 * Where {@link onCancelled} delivers a cancel: to `fn`, until the caller empties it.
 *
 * Empty it (`cell.fn = undefined`) once the work settles, so a late cancel does nothing.
 *
 * @example
 * ```ts
 * declare const token: CancelToken
 * const cell: CancelCell = { fn: (reason) => console.log('cancelled:', reason) }
 * onCancelled(token, cell)
 * // ... the work settles:
 * cell.fn = undefined
 * ```
 */
export interface CancelCell {
  fn: ((reason: CancelReason) => void) | undefined;
}

/**
 * Call `cell.fn(reason)` when `token` is cancelled, if the cell still holds a
 * function then. The reaction chained on the token's one `whenCancelled()`
 * promise holds only the cell: a caller racing many calls against one long
 * run empties the cell when its call settles, and nothing of the call (its
 * promise, its result) stays alive until the run ends.
 *
 * @example
 * ```ts
 * const source = new CancelSource()
 * const cell: CancelCell = { fn: (reason) => console.log('stopped:', reason) }
 * onCancelled(source.token, cell)
 * source.cancel('user') // logs "stopped: user" (asynchronously)
 * ```
 */
export function onCancelled(token: CancelToken, cell: CancelCell): void {
  void token.whenCancelled().then((reason) => cell.fn?.(reason));
}
