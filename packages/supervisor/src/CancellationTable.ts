import { type CancelReason, type Clock, InvalidArgumentError, TroupeError, type Usage } from '@troupe/core';
import { CancelSlots, describeValue, type SlotHandle } from '@troupe/core/internal';
import { systemClock } from '@troupe/subagent';

/** Options of {@link CancellationTable}. */
export interface CancellationTableOptions {
  /** Time base of run deadlines; `expireLanes()` without an argument reads it. Default: `systemClock`. */
  readonly clock?: Clock | undefined;
  /** Slots allocated up front in this thread's segment. Default 1024. */
  readonly capacity?: number | undefined;
  /** This thread's segment grows (doubling) up to this many live runs, then refuses. Default 65,536. */
  readonly maxCapacity?: number | undefined;
  /** Lanes per slot: tool calls of one run the watchdog can cancel alone (0–16). Default 4. */
  readonly lanes?: number | undefined;
}

/** Options of {@link CancellationTable.register}. */
export interface RegisterOptions {
  /** Absolute deadline, epoch ms in the clock's base, as the run's tools see it. */
  readonly deadline?: number | undefined;
  /**
   * Where the run's slot lives: `'local'` (default) claims one at once in this
   * thread's own segment; `'deferred'` claims none until {@link CancellationTable.bind}
   * gives it one in the segment of the thread the run is dispatched to.
   */
  readonly slot?: 'local' | 'deferred' | undefined;
}

/** What {@link CancellationTable.register} returns: the slot handle (local runs) and the effective deadline. */
export interface RegisteredSlot extends SlotHandle {
  readonly deadline: number | undefined;
}

/** One call of a run that {@link CancellationTable.expireLanes} cancelled: its lane's deadline passed; `call` tells it apart from later calls on the lane. */
export interface ExpiredEntry {
  readonly kind: 'lane';
  readonly key: string;
  readonly lane: number;
  readonly call: number;
}

/**
 * A buffer of slots that one thread reads and writes: this thread's own, or
 * one per worker thread. A worker can write any word of the buffer it holds,
 * so giving each thread its own confines what a forged write can reach to
 * the runs of the thread that forged it.
 */
export interface Segment {
  readonly slots: CancelSlots;
  /** The clock lane deadlines are written in (a worker's is the system clock). */
  readonly laneClock: Clock;
  readonly free: number[];
  fresh: number;
  /** Slots claimed and not released. */
  live: number;
}

interface Node {
  readonly key: string;
  deadline: number | undefined;
  /** Why the run was cancelled: this table's own record, never read back from shared memory. */
  reason: CancelReason | undefined;
  segment: Segment | undefined;
  handle: SlotHandle | undefined;
}

const REASONS: ReadonlySet<string> = new Set<CancelReason>(['user', 'parent', 'deadline', 'shutdown']);

/**
 * The slots of live runs in shared buffers, which the threads running them
 * read with one `Atomics.load`: slots only. Which run is whose child, and so
 * what a cancel reaches, is the run tree's to know (it walks its own nodes and
 * cancels each slot); a deadline is the tree's to enforce (it cancels the run
 * when it passes). This table keeps, per run:
 *
 * - its cancel state (`cancel(key, reason)` records the reason here and writes
 *   the run's slot, ringing the doorbell of its segment once); what this
 *   table decides from (cancelled or not, the reason, deadlines, generations)
 *   lives in its own memory: a word a worker forges can make that worker's own
 *   runs look cancelled to themselves, nothing more;
 * - its deadline as its tools see it (written to the slot);
 * - its slot, in a segment: this thread's own (parent agents), and one per
 *   worker thread ({@link CancellationTable.segment}), claimed when a run is
 *   dispatched there ({@link CancellationTable.bind}). A run registered
 *   cancelled gets its slot cancelled when it is bound;
 * - slots are reused through a free list; each reuse bumps the slot's
 *   generation, so a handle of a finished run never sees a later run's cancel;
 * - `expireLanes(now)` cancels single tool calls (by lane) whose deadline
 *   passed. The `Watchdog` calls it on a timer.
 *
 * Main thread only. Cancelling an unknown or released key is a no-op that
 * returns false (a cancel may race the end of a run).
 *
 * @example
 * ```ts
 * const table = new CancellationTable({ clock: systemClock })
 * const slot = table.register('run-a', { deadline: systemClock.now() + 30_000 })
 * table.cancel('run-a', 'user') // the slot reads cancelled, with reason 'user'
 * table.release('run-a')
 * ```
 */
export class CancellationTable {
  readonly #local: Segment;
  readonly #clock: Clock;
  readonly #nodes = new Map<string, Node>();
  readonly #laneScratch: number[] = [];
  readonly #segments = new Map<number, Segment>();
  readonly #lanes: number;

  constructor(options: CancellationTableOptions = {}) {
    const capacity = options.capacity ?? 1024;
    const maxCapacity = options.maxCapacity ?? Math.max(65_536, Number.isSafeInteger(capacity) ? capacity : 0);
    this.#lanes = options.lanes ?? 4;
    this.#clock = options.clock ?? systemClock;
    this.#local = newSegment(CancelSlots.create({ capacity, maxCapacity, lanes: this.#lanes }), this.#clock);
  }

  /** This thread's own buffer (parent agents' slots): never post it to a worker. */
  get buffer(): SharedArrayBuffer {
    return this.#local.slots.buffer;
  }

  /** The slot layout over {@link CancellationTable.buffer}, for same-thread tokens (`slotRunCancellation`). */
  get slots(): CancelSlots {
    return this.#local.slots;
  }

  /** Lanes per slot. */
  get lanes(): number {
    return this.#lanes;
  }

  /** Runs registered and not released. */
  get size(): number {
    return this.#nodes.size;
  }

  /** Slots this thread's segment holds now. */
  get capacity(): number {
    return this.#local.slots.capacity;
  }

  /** The most slots this thread's segment may grow to. */
  get maxCapacity(): number {
    return this.#local.slots.maxCapacity;
  }

  /**
   * The segment of worker thread `thread`, made on first use (a small buffer
   * that grows: a worker runs one run at a time). Post its buffer to that
   * thread only.
   */
  segment(thread: number): Segment {
    let segment = this.#segments.get(thread);
    if (segment === undefined) {
      segment = newSegment(CancelSlots.create({ capacity: 4, maxCapacity: 256, lanes: this.#lanes }), systemClock);
      this.#segments.set(thread, segment);
    }
    return segment;
  }

  /** This thread's own segment (for {@link CancellationTable.bind} of a run that runs here). */
  get local(): Segment {
    return this.#local;
  }

  /** Forget worker thread `thread`'s segment (the thread is gone). Runs still bound to it keep their JS state. */
  dropSegment(thread: number): void {
    this.#segments.delete(thread);
  }

  /** Segments of worker threads. */
  get segments(): number {
    return this.#segments.size;
  }

  /**
   * Register run `key`. O(1) (amortised over growth).
   *
   * Throws `InvalidArgumentError` for an empty or already registered key or a
   * bad deadline, and a `TroupeError` `ERR_TABLE_FULL` past `maxCapacity`.
   */
  register(key: string, options: RegisterOptions = {}): RegisteredSlot {
    if (typeof key !== 'string' || key.length === 0) {
      throw new InvalidArgumentError(`a run key must be a non-empty string, got ${JSON.stringify(key)}`);
    }
    if (this.#nodes.has(key)) {
      throw new InvalidArgumentError(`run "${key}" is already registered: release it first or use a new id`);
    }
    CancelSlots.checkDeadline(options.deadline);
    const node: Node = { key, deadline: options.deadline, reason: undefined, segment: undefined, handle: undefined };
    if (options.slot !== 'deferred') this.#claim(node, this.#local);
    this.#nodes.set(key, node);
    const handle = node.handle;
    return { index: handle?.index ?? -1, generation: handle?.generation ?? 0, deadline: node.deadline };
  }

  /**
   * Give a registered run without a slot one in `segment` (the run is being
   * dispatched to that segment's thread). The slot starts in the run's
   * current state: cancelled if the run already is, with its deadline.
   */
  bind(key: string, segment: Segment): SlotHandle {
    const node = this.#nodes.get(key);
    if (node === undefined) throw new InvalidArgumentError(`run "${key}" is not registered`);
    if (node.handle !== undefined) this.unbind(key);
    return this.#claim(node, segment);
  }

  /**
   * Free run `key`'s slot but keep the run registered (its work left the
   * thread that held the slot; it may be bound again).
   */
  unbind(key: string): boolean {
    const node = this.#nodes.get(key);
    if (node === undefined || node.handle === undefined || node.segment === undefined) return false;
    const segment = node.segment;
    segment.slots.retire(node.handle);
    segment.free.push(node.handle.index);
    segment.live--;
    node.handle = undefined;
    node.segment = undefined;
    return true;
  }

  #claim(node: Node, segment: Segment): SlotHandle {
    const handle = segment.slots.claim(allocate(segment));
    segment.live++;
    node.segment = segment;
    node.handle = handle;
    if (node.deadline !== undefined) segment.slots.setRunDeadline(handle.index, node.deadline);
    if (node.reason !== undefined) segment.slots.cancelRun(handle, node.reason);
    return handle;
  }

  /** The slot handle of a registered run, to send to its worker (`undefined` while it has none). */
  handle(key: string): SlotHandle | undefined {
    return this.#nodes.get(key)?.handle;
  }

  /** Whether `key` is registered (and not released). */
  has(key: string): boolean {
    return this.#nodes.has(key);
  }

  /**
   * The run is over: free its slot (if it still has one) and forget it (O(1)).
   * Lingering readers of the slot see it cancelled (`shutdown`); the next run
   * in the slot gets a new generation. Returns false for an unknown or
   * released key.
   */
  release(key: string): boolean {
    const node = this.#nodes.get(key);
    if (node === undefined) return false;
    this.unbind(key);
    this.#nodes.delete(key);
    return true;
  }

  /**
   * Cancel run `key` with `reason`: recorded here, and written to its slot
   * when it has one (else when it is bound). Wakes its `signal` bridge.
   * Returns false, without error, for an unknown, released or already
   * cancelled key (the first reason stays).
   */
  cancel(key: string, reason: CancelReason): boolean {
    if (!REASONS.has(reason)) {
      throw new InvalidArgumentError(
        `unknown cancel reason ${JSON.stringify(reason)}: use 'user', 'parent', 'deadline' or 'shutdown'`,
      );
    }
    const node = this.#nodes.get(key);
    if (node === undefined || node.reason !== undefined) return false;
    node.reason = reason;
    if (node.segment !== undefined && node.handle !== undefined) node.segment.slots.cancelRun(node.handle, reason);
    return true;
  }

  /** Whether run `key` is cancelled; false for unknown keys. */
  isCancelled(key: string): boolean {
    return this.#nodes.get(key)?.reason !== undefined;
  }

  /** Why run `key` was cancelled; `undefined` while live or unknown. */
  reason(key: string): CancelReason | undefined {
    return this.#nodes.get(key)?.reason;
  }

  /** Run `key`'s effective deadline (epoch ms), if any. */
  deadlineOf(key: string): number | undefined {
    return this.#nodes.get(key)?.deadline;
  }

  /**
   * Set (or clear, with `undefined`) run `key`'s deadline as its tools see it.
   * Returns false for an unknown key. Throws `InvalidArgumentError` for a
   * negative or non-finite deadline.
   */
  setDeadline(key: string, deadline: number | undefined): boolean {
    CancelSlots.checkDeadline(deadline);
    const node = this.#nodes.get(key);
    if (node === undefined) return false;
    node.deadline = deadline;
    if (node.segment !== undefined && node.handle !== undefined) {
      node.segment.slots.setRunDeadline(node.handle.index, deadline);
    }
    return true;
  }

  /**
   * Cancel the single calls whose lane deadline passed at `now` (epoch ms;
   * default `clock.now()`): that lane only, reason `deadline`; the run goes
   * on. Lane deadlines are read in each segment's lane clock (a worker writes
   * them in the system clock). Returns what it cancelled.
   */
  expireLanes(now: number = this.#clock.now()): ExpiredEntry[] {
    if (typeof now !== 'number' || !Number.isFinite(now)) {
      throw new InvalidArgumentError(`expireLanes(now) needs a finite time in epoch ms, got ${describeValue(now)}`);
    }
    const out: ExpiredEntry[] = [];
    if (this.#lanes === 0) return out;
    const touched: Segment[] = [];
    const lanes = this.#laneScratch;
    const systemNow = systemClock.now();
    try {
      for (const node of this.#nodes.values()) {
        const segment = node.segment;
        const handle = node.handle;
        if (segment === undefined || handle === undefined) continue;
        if (!touched.includes(segment)) {
          touched.push(segment);
          segment.slots.beginBatch();
        }
        const laneNow =
          segment.laneClock === this.#clock
            ? now
            : segment.laneClock === systemClock
              ? systemNow
              : segment.laneClock.now();
        segment.slots.expireLanes(handle, laneNow, lanes);
        for (let i = 0; i < lanes.length; i += 2) {
          out.push({ kind: 'lane', key: node.key, lane: lanes[i] as number, call: lanes[i + 1] as number });
        }
        lanes.length = 0;
      }
    } finally {
      // Each touched segment's doorbell rings once.
      for (const segment of touched) segment.slots.endBatch();
    }
    return out;
  }

  /**
   * Whether run `key`'s `lane` still holds call `call` (from an
   * {@link ExpiredEntry}) — the call was cancelled but has not returned.
   * Read from the run's own segment: only its thread can make it lie.
   */
  isLaneHeld(key: string, lane: number, call: number): boolean {
    const node = this.#nodes.get(key);
    if (node?.handle === undefined || node.segment === undefined) return false;
    return node.segment.slots.isLaneHeld(node.handle, lane, call);
  }

  /**
   * The tokens run `key`'s worker noted in its slot so far (see
   * `CancelSlots.noteUsage`), while it still has the slot: what a run whose
   * thread died before it reported had spent. `undefined` when none.
   */
  usageOf(key: string): Usage | undefined {
    const node = this.#nodes.get(key);
    if (node?.handle === undefined || node.segment === undefined) return undefined;
    const usage = node.segment.slots.usageOf(node.handle.index);
    return usage.inputTokens === 0 && usage.outputTokens === 0 ? undefined : usage;
  }

  /** What the call on `lane` of run `key` is, as the run's thread said (for error messages only). */
  laneInfo(key: string, lane: number): { readonly tool: number; readonly timeoutMs: number | undefined } | undefined {
    const node = this.#nodes.get(key);
    if (node?.handle === undefined || node.segment === undefined) return undefined;
    return node.segment.slots.laneInfo(node.handle.index, lane);
  }
}

function newSegment(slots: CancelSlots, laneClock: Clock): Segment {
  return { slots, laneClock, free: [], fresh: 0, live: 0 };
}

function allocate(segment: Segment): number {
  const reused = segment.free.pop();
  if (reused !== undefined) return reused;
  const slots = segment.slots;
  const capacity = slots.capacity;
  if (segment.fresh === capacity) {
    const max = slots.maxCapacity;
    if (capacity >= max) {
      throw new TroupeError(
        `the cancellation table is full: ${capacity} slots (maxCapacity) hold live runs; release finished runs or raise maxCapacity`,
        { code: 'ERR_TABLE_FULL' },
      );
    }
    slots.grow(Math.min(max, capacity * 2));
  }
  return segment.fresh++;
}
