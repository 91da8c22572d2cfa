import {
  type CancelReason,
  CancelSlots,
  type Clock,
  InvalidArgumentError,
  type SlotHandle,
  TroupeError,
} from '@troupe/core';
import { systemClock } from '@troupe/subagent';

/** Options of {@link CancellationTable}. */
export interface CancellationTableOptions {
  /** Time base of deadlines; `expire()` without an argument reads it. Default: `systemClock`. */
  readonly clock?: Clock | undefined;
  /** Slots allocated up front. Default 1024. */
  readonly capacity?: number | undefined;
  /** The table grows (doubling) up to this many live runs, then refuses. Default 65,536. */
  readonly maxCapacity?: number | undefined;
  /** Lanes per slot: tool calls of one run the watchdog can cancel alone (0–16). Default 4. */
  readonly lanes?: number | undefined;
}

/** Options of {@link CancellationTable.register}. */
export interface RegisterOptions {
  /** The parent run's key: cancelling it cancels this one (reason `parent`). */
  readonly parent?: string | undefined;
  /** Absolute deadline, epoch ms in the clock's base; capped at the parent's. */
  readonly deadline?: number | undefined;
}

/** What {@link CancellationTable.register} returns: the handle to send to the worker, and the effective deadline. */
export interface RegisteredSlot extends SlotHandle {
  readonly deadline: number | undefined;
}

/** Something {@link CancellationTable.expire} cancelled. */
export type ExpiredEntry =
  /** A run: its own deadline passed (`deadline`) or an ancestor's did (`parent`). */
  | { readonly kind: 'run'; readonly key: string; readonly reason: 'deadline' | 'parent' }
  /** One call of a run: its lane's deadline passed; `call` tells it apart from later calls on the lane. */
  | { readonly kind: 'lane'; readonly key: string; readonly lane: number; readonly call: number };

interface Node {
  readonly key: string;
  readonly handle: SlotHandle;
  parent: Node | undefined;
  children: Set<Node> | undefined;
  deadline: number | undefined;
}

const REASONS: ReadonlySet<string> = new Set<CancelReason>(['user', 'parent', 'deadline', 'shutdown']);

/**
 * The supervisor's cancellation table: one slot per live run in a shared
 * buffer every worker holds, the parent → child hierarchy, and deadlines.
 *
 * - `cancel(key, reason)` writes the run's slot and pushes `parent` down to
 *   every live descendant, so a worker's check stays one `Atomics.load`
 *   whatever the depth. A child registered under a cancelled ancestor starts
 *   cancelled, so a spawn racing a cancel is never missed.
 * - Slots are reused through a free list; each reuse bumps the slot's
 *   generation, so a handle of a finished run never sees a later run's cancel.
 * - A child's deadline is never later than its parent's; `expire(now)` cancels
 *   runs (and single calls, by lane) whose deadline passed. The `Watchdog`
 *   calls it on a timer.
 * - The buffer grows when full (workers holding it see the new slots) up to
 *   `maxCapacity`, then `register` throws `ERR_TABLE_FULL`.
 *
 * Main thread only: the hierarchy is plain JS state. Cancelling an unknown or
 * released key is a no-op that returns false (a cancel may race the end of a run).
 *
 * @example
 * ```ts
 * const table = new CancellationTable({ clock: systemClock })
 * const worker = new Worker(url, { workerData: { buffer: table.buffer } }) // the buffer once per worker
 * const parent = table.register('a')
 * const child = table.register('a-sub-1', { parent: 'a', deadline: systemClock.now() + 30_000 })
 * worker.postMessage({ handle: { index: child.index, generation: child.generation } })
 * table.cancel('a', 'user') // the worker's isCancelled() turns true, reason 'parent'
 * table.release('a-sub-1'); table.release('a')
 * ```
 */
export class CancellationTable {
  readonly #slots: CancelSlots;
  readonly #clock: Clock;
  readonly #nodes = new Map<string, Node>();
  readonly #free: number[] = [];
  readonly #withDeadline = new Set<Node>();
  readonly #laneScratch: number[] = [];
  #fresh = 0;

  constructor(options: CancellationTableOptions = {}) {
    const capacity = options.capacity ?? 1024;
    const maxCapacity = options.maxCapacity ?? Math.max(65_536, Number.isSafeInteger(capacity) ? capacity : 0);
    this.#slots = CancelSlots.create({ capacity, maxCapacity, lanes: options.lanes ?? 4 });
    this.#clock = options.clock ?? systemClock;
  }

  /** The shared buffer; post it to workers once, with each run's handle. */
  get buffer(): SharedArrayBuffer {
    return this.#slots.buffer;
  }

  /** The slot layout over {@link CancellationTable.buffer}, for same-thread tokens (`slotRunCancellation`). */
  get slots(): CancelSlots {
    return this.#slots;
  }

  /** Lanes per slot. */
  get lanes(): number {
    return this.#slots.lanes;
  }

  /** Runs registered and not released. */
  get size(): number {
    return this.#nodes.size;
  }

  /** Slots the buffer holds now. */
  get capacity(): number {
    return this.#slots.capacity;
  }

  /** The most slots the table may grow to. */
  get maxCapacity(): number {
    return this.#slots.maxCapacity;
  }

  /**
   * Give run `key` a slot. O(1) (amortised over growth). The deadline is capped
   * at the parent's; if the parent or any ancestor is already cancelled, the
   * run starts cancelled with reason `parent`.
   *
   * Throws `InvalidArgumentError` for an empty or already registered key, an
   * unknown parent (`ERR_UNKNOWN_AGENT`) or a bad deadline, and a
   * `TroupeError` `ERR_TABLE_FULL` past `maxCapacity`.
   */
  register(key: string, options: RegisterOptions = {}): RegisteredSlot {
    if (typeof key !== 'string' || key.length === 0) {
      throw new InvalidArgumentError(`a run key must be a non-empty string, got ${JSON.stringify(key)}`);
    }
    if (this.#nodes.has(key)) {
      throw new InvalidArgumentError(`run "${key}" is already registered: release it first or use a new id`);
    }
    CancelSlots.checkDeadline(options.deadline);
    let parent: Node | undefined;
    if (options.parent !== undefined) {
      parent = this.#nodes.get(options.parent);
      if (parent === undefined) {
        throw new InvalidArgumentError(
          `parent "${options.parent}" of run "${key}" is not registered (never, or released): register the parent first`,
          { code: 'ERR_UNKNOWN_AGENT' },
        );
      }
    }
    const handle = this.#slots.claim(this.#allocate());
    const node: Node = {
      key,
      handle,
      parent,
      children: undefined,
      deadline: minDeadline(options.deadline, parent?.deadline),
    };
    this.#nodes.set(key, node);
    if (node.deadline !== undefined) {
      this.#slots.setRunDeadline(handle.index, node.deadline);
      this.#withDeadline.add(node);
    }
    if (parent !== undefined) {
      if (parent.children === undefined) parent.children = new Set();
      parent.children.add(node);
      // Check the ancestors once: a child born while one of them is being (or
      // was) cancelled must not miss it.
      for (let up: Node | undefined = parent; up !== undefined; up = up.parent) {
        if (!this.#slots.isLive(up.handle)) {
          this.#slots.cancelRun(handle, 'parent');
          break;
        }
      }
    }
    return { index: handle.index, generation: handle.generation, deadline: node.deadline };
  }

  /** The slot handle of a registered run, to send to its worker. */
  handle(key: string): SlotHandle | undefined {
    return this.#nodes.get(key)?.handle;
  }

  /** Whether `key` is registered (and not released). */
  has(key: string): boolean {
    return this.#nodes.has(key);
  }

  /**
   * The run ended: free its slot (O(1)). Its worker must have closed its
   * `slotRunCancellation` or been killed (signal bridges are not woken here:
   * a closed run has none). Lingering readers of the slot see it cancelled
   * (`shutdown`); the next run in the slot gets a new generation.
   * Children still registered keep their cancel ancestry: they move up to the
   * released run's parent. Returns false for an unknown or released key.
   */
  release(key: string): boolean {
    const node = this.#nodes.get(key);
    if (node === undefined) return false;
    this.#nodes.delete(key);
    this.#withDeadline.delete(node);
    this.#slots.retire(node.handle);
    const parent = node.parent;
    parent?.children?.delete(node);
    if (node.children !== undefined) {
      for (const child of node.children) {
        child.parent = parent;
        if (parent !== undefined) {
          if (parent.children === undefined) parent.children = new Set();
          parent.children.add(child);
        }
      }
      node.children = undefined;
    }
    node.parent = undefined;
    this.#free.push(node.handle.index);
    return true;
  }

  /**
   * Cancel run `key` with `reason` and every live descendant with `parent`.
   * Wakes their `signal` bridges. Returns false, without error, for an unknown,
   * released or already cancelled key (the first reason stays).
   */
  cancel(key: string, reason: CancelReason): boolean {
    if (!REASONS.has(reason)) {
      throw new InvalidArgumentError(
        `unknown cancel reason ${JSON.stringify(reason)}: use 'user', 'parent', 'deadline' or 'shutdown'`,
      );
    }
    const node = this.#nodes.get(key);
    if (node === undefined) return false;
    return this.#slots.batch(() => this.#cancelNode(node, reason, undefined));
  }

  /** Whether run `key` is cancelled; false for unknown keys. */
  isCancelled(key: string): boolean {
    const node = this.#nodes.get(key);
    return node !== undefined && !this.#slots.isLive(node.handle);
  }

  /** Why run `key` was cancelled; `undefined` while live or unknown. */
  reason(key: string): CancelReason | undefined {
    const node = this.#nodes.get(key);
    return node === undefined ? undefined : this.#slots.runReason(node.handle);
  }

  /** Run `key`'s effective deadline (epoch ms), if any. */
  deadlineOf(key: string): number | undefined {
    return this.#nodes.get(key)?.deadline;
  }

  /**
   * Set (or clear, with `undefined`) run `key`'s deadline. It is capped at the
   * parent's, and descendants whose deadline is later are brought forward to
   * it. Returns false for an unknown key; read the result with `deadlineOf`.
   * Throws `InvalidArgumentError` for a negative or non-finite deadline.
   */
  setDeadline(key: string, deadline: number | undefined): boolean {
    CancelSlots.checkDeadline(deadline);
    const node = this.#nodes.get(key);
    if (node === undefined) return false;
    this.#setNodeDeadline(node, minDeadline(deadline, node.parent?.deadline));
    const cap = node.deadline;
    if (cap === undefined || node.children === undefined) return true;
    const stack: Node[] = [...node.children];
    for (let child = stack.pop(); child !== undefined; child = stack.pop()) {
      // A child within the cap has its own descendants within it already.
      if (child.deadline !== undefined && child.deadline <= cap) continue;
      this.#setNodeDeadline(child, cap);
      if (child.children !== undefined) for (const grandchild of child.children) stack.push(grandchild);
    }
    return true;
  }

  /**
   * Cancel what is overdue at `now` (epoch ms; default `clock.now()`): runs
   * whose deadline passed (reason `deadline`, pushed down as `parent`) and
   * single calls whose lane deadline passed (that lane only, reason
   * `deadline`; the run goes on). Returns what it cancelled.
   */
  expire(now: number = this.#clock.now()): ExpiredEntry[] {
    if (typeof now !== 'number' || !Number.isFinite(now)) {
      throw new InvalidArgumentError(`expire(now) needs a finite time in epoch ms, got ${String(now)}`);
    }
    const out: ExpiredEntry[] = [];
    this.#slots.batch(() => {
      for (const node of this.#withDeadline) {
        if (node.deadline !== undefined && node.deadline <= now && this.#slots.isLive(node.handle)) {
          this.#cancelNode(node, 'deadline', out);
        }
      }
      if (this.#slots.lanes > 0) {
        const lanes = this.#laneScratch;
        for (const node of this.#nodes.values()) {
          this.#slots.expireLanes(node.handle, now, lanes);
          for (let i = 0; i < lanes.length; i += 2) {
            out.push({ kind: 'lane', key: node.key, lane: lanes[i] as number, call: lanes[i + 1] as number });
          }
          lanes.length = 0;
        }
      }
    });
    return out;
  }

  /**
   * Whether run `key`'s `lane` still holds call `call` (from an
   * {@link ExpiredEntry}) — the call was cancelled but has not returned.
   */
  isLaneHeld(key: string, lane: number, call: number): boolean {
    const node = this.#nodes.get(key);
    return node !== undefined && this.#slots.isLaneHeld(node.handle, lane, call);
  }

  #cancelNode(node: Node, reason: CancelReason, out: ExpiredEntry[] | undefined): boolean {
    if (!this.#slots.cancelRun(node.handle, reason)) return false;
    if (out !== undefined) out.push({ kind: 'run', key: node.key, reason: 'deadline' });
    if (node.children === undefined) return true;
    // Push down. Invariant (kept by every cancel, by register's ancestor check,
    // and by release moving children up): a cancelled run's descendants are
    // all cancelled, so a child that was already cancelled is not descended.
    const stack: Node[] = [];
    for (const child of node.children) stack.push(child);
    for (let child = stack.pop(); child !== undefined; child = stack.pop()) {
      if (!this.#slots.cancelRun(child.handle, 'parent')) continue;
      if (out !== undefined) out.push({ kind: 'run', key: child.key, reason: 'parent' });
      if (child.children !== undefined) for (const grandchild of child.children) stack.push(grandchild);
    }
    return true;
  }

  #setNodeDeadline(node: Node, deadline: number | undefined): void {
    node.deadline = deadline;
    this.#slots.setRunDeadline(node.handle.index, deadline);
    if (deadline === undefined) this.#withDeadline.delete(node);
    else this.#withDeadline.add(node);
  }

  #allocate(): number {
    const reused = this.#free.pop();
    if (reused !== undefined) return reused;
    const capacity = this.#slots.capacity;
    if (this.#fresh === capacity) {
      const max = this.#slots.maxCapacity;
      if (capacity >= max) {
        throw new TroupeError(
          `the cancellation table is full: ${capacity} slots (maxCapacity) hold live runs; release finished runs or raise maxCapacity`,
          { code: 'ERR_TABLE_FULL' },
        );
      }
      this.#slots.grow(Math.min(max, capacity * 2));
    }
    return this.#fresh++;
  }
}

function minDeadline(a: number | undefined, b: number | undefined): number | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return a < b ? a : b;
}
