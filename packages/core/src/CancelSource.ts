import type { CallCancellation, CancelToken, RunCancellation } from './CancelToken.js';
import { SettlingToken } from './SettlingToken.js';
import type { CancelReason } from './TroupeError.js';

/**
 * An in-process cancellation source: cancels its token, and every child
 * source, synchronously. For code on one thread (tests, a parent agent's own
 * calls); across threads the shared cancellation table does the same job.
 *
 * @example
 * ```ts
 * const source = new CancelSource()
 * const child = source.child()
 * source.cancel('user')
 * child.token.isCancelled() // true, reason 'parent'
 * ```
 */
export class CancelSource extends SettlingToken {
  #reason: CancelReason | undefined;
  #children: Set<CancelSource> | undefined;
  #parent: CancelSource | undefined;

  /** The token view of this source (the source itself). */
  get token(): CancelToken {
    return this;
  }

  get reason(): CancelReason | undefined {
    return this.#reason;
  }

  isCancelled(): boolean {
    return this.#reason !== undefined;
  }

  // A source never ends uncancelled, and cancel() settles it itself: nothing to watch.
  protected get ended(): boolean {
    return false;
  }

  protected watch(): void {}

  /**
   * Cancel this source and its descendants (they get reason `parent`).
   * Returns false when it was already cancelled.
   */
  cancel(reason: CancelReason): boolean {
    if (this.#reason !== undefined) return false;
    this.#reason = reason;
    this.settle(reason);
    if (this.#children !== undefined) {
      for (const child of this.#children) child.cancel('parent');
      this.#children = undefined;
    }
    this.#detach();
    return true;
  }

  /** A child source, cancelled (reason `parent`) when this one is; already cancelled if this one is. */
  child(): CancelSource {
    const child = new CancelSource();
    if (this.#reason !== undefined) {
      child.cancel('parent');
      return child;
    }
    child.#parent = this;
    if (this.#children === undefined) this.#children = new Set();
    this.#children.add(child);
    return child;
  }

  /** Detach from the parent so a finished child is not kept alive. Idempotent. */
  dispose(): void {
    this.#detach();
  }

  #detach(): void {
    const parent = this.#parent;
    if (parent !== undefined) parent.#children?.delete(this);
    this.#parent = undefined;
  }
}

/**
 * A {@link RunCancellation} over an in-process {@link CancelSource}. Calls
 * get child sources; the executor cancels one on timeout without touching
 * the run.
 */
export function localRunCancellation(source: CancelSource = new CancelSource(), deadline?: number): RunCancellation {
  return {
    token: source,
    deadline,
    openCall(): CallCancellation {
      const call = source.child();
      return {
        token: call,
        cancel: (reason) => {
          call.cancel(reason);
        },
        close: () => {
          call.dispose();
        },
      };
    },
    cancel: (reason) => {
      source.cancel(reason);
    },
  };
}
