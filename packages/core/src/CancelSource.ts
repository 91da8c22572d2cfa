import type { CallCancellation, CancelToken, RunCancellation } from './CancelToken.js';
import { CancelledError, type CancelReason } from './TroupeError.js';

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
export class CancelSource implements CancelToken {
  #reason: CancelReason | undefined;
  #controller: AbortController | undefined;
  #cancelled: Promise<CancelReason> | undefined;
  #resolveCancelled: ((reason: CancelReason) => void) | undefined;
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

  throwIfCancelled(): void {
    if (this.#reason !== undefined) throw new CancelledError(this.#reason);
  }

  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#reason !== undefined) this.#controller.abort(new CancelledError(this.#reason));
    }
    return this.#controller.signal;
  }

  whenCancelled(): Promise<CancelReason> {
    if (this.#cancelled === undefined) {
      const reason = this.#reason;
      if (reason !== undefined) this.#cancelled = Promise.resolve(reason);
      else this.#cancelled = new Promise((resolve) => (this.#resolveCancelled = resolve));
    }
    return this.#cancelled;
  }

  /**
   * Cancel this source and its descendants (they get reason `parent`).
   * Returns false when it was already cancelled.
   */
  cancel(reason: CancelReason): boolean {
    if (this.#reason !== undefined) return false;
    this.#reason = reason;
    this.#controller?.abort(new CancelledError(reason));
    this.#resolveCancelled?.(reason);
    this.#resolveCancelled = undefined;
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
  };
}
