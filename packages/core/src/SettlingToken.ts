import type { CancelToken } from './CancelToken.js';
import { CancelledError, type CancelReason } from './TroupeError.js';

/**
 * What every token kind shares: `throwIfCancelled`, and the `signal` and
 * `whenCancelled()` promise a token hands out to wait on its cancel — each made
 * on first use and settled once by `settle`. A subclass says how to start
 * watching (`watch`: a slot token's doorbell bridge, a fallback call following
 * its run token, nothing for an in-process source that settles itself) and
 * whether it has ended.
 */
export abstract class SettlingToken implements CancelToken {
  #controller: AbortController | undefined;
  #cancelled: Promise<CancelReason> | undefined;
  #resolve: ((reason: CancelReason) => void) | undefined;

  abstract isCancelled(): boolean;
  abstract get reason(): CancelReason | undefined;
  /** The token ended (uncancelled, when `reason` is undefined). */
  protected abstract get ended(): boolean;
  /** Start watching for the cancel (at most once; nothing once ended). */
  protected abstract watch(): void;

  throwIfCancelled(): void {
    const reason = this.reason;
    if (reason !== undefined) throw new CancelledError(reason);
  }

  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      const controller = new AbortController();
      this.#controller = controller;
      const reason = this.reason;
      if (reason !== undefined) controller.abort(new CancelledError(reason));
      else this.watch();
    }
    return this.#controller.signal;
  }

  whenCancelled(): Promise<CancelReason> {
    if (this.#cancelled === undefined) {
      const reason = this.reason;
      if (reason !== undefined) this.#cancelled = Promise.resolve(reason);
      // Ended uncancelled: never settles (one promise per token, not a shared one
      // that would keep every reaction chained on it).
      else if (this.ended) this.#cancelled = new Promise(() => {});
      else {
        this.#cancelled = new Promise((resolve) => {
          this.#resolve = resolve;
        });
        this.watch();
      }
    }
    return this.#cancelled;
  }

  /** Abort the signal and settle the promise, if they were made. */
  protected settle(reason: CancelReason): void {
    const controller = this.#controller;
    if (controller !== undefined && !controller.signal.aborted) controller.abort(new CancelledError(reason));
    this.#resolve?.(reason);
    this.#resolve = undefined;
  }
}
