import { type CancelReason, type Clock, InvalidArgumentError, TroupeError, type Usage } from '@troupe/core';
import { CancelSlots, describeValue, type SlotHandle } from '@troupe/core/internal';
import { systemClock } from '@troupe/subagent';

/** Options of {@link CancellationTable}. */
export interface CancellationTableOptions {
  /** Time base of run deadlines; `expire()` without an argument reads it. Default: `systemClock`. */
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
  /** The parent run's key: cancelling it cancels this one (reason `parent`). */
  readonly parent?: string | undefined;
  /** Absolute deadline, epoch ms in the clock's base; capped at the parent's. */
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

/** Something {@link CancellationTable.expire} cancelled. */
export type ExpiredEntry =
  /** A run: its own deadline passed (`deadline`) or an ancestor's did (`parent`). */
  | { readonly kind: 'run'; readonly key: string; readonly reason: 'deadline' | 'parent' }
  /** One call of a run: its lane's deadline passed; `call` tells it apart from later calls on the lane. */
  | { readonly kind: 'lane'; readonly key: string; readonly lane: number; readonly call: number };

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
  parent: Node | undefined;
  children: Set<Node> | undefined;
  deadline: number | undefined;
  /** Why the run was cancelled: this table's own record, never read back from shared memory. */
  reason: CancelReason | undefined;
  segment: Segment | undefined;
  handle: SlotHandle | undefined;
}

const REASONS: ReadonlySet<string> = new Set<CancelReason>(['user', 'parent', 'deadline', 'shutdown']);

/**
 * The supervisor's cancellation table: the parent → child hierarchy of live
 * runs, their cancel state and deadlines, and their slots in shared buffers
 * that the threads running them read with one `Atomics.load`.
 *
 * - `cancel(key, reason)` records the cancel here and writes the run's slot,
 *   then pushes `parent` down to every live descendant, so a worker's check
 *   stays one load whatever the depth. A child registered under a cancelled
 *   ancestor starts cancelled, so a spawn racing a cancel is never missed.
 * - What this table decides from (cancelled or not, the reason, deadlines,
 *   generations) lives in its own memory: a word a worker forges can make
 *   that worker's own runs look cancelled to themselves, nothing more.
 * - Slots live in segments: this thread's own (parent agents), and one per
 *   worker thread ({@link CancellationTable.segment}), claimed when a run is
 *   dispatched there ({@link CancellationTable.bind}).
 * - Slots are reused through a free list; each reuse bumps the slot's
 *   generation, so a handle of a finished run never sees a later run's cancel.
 * - A child's deadline is never later than its parent's; `expire(now)` cancels
 *   runs (and single calls, by lane) whose deadline passed. The `Watchdog`
 *   calls it on a timer.
 *
 * Main thread only. Cancelling an unknown or released key is a no-op that
 * returns false (a cancel may race the end of a run).
 *
 * @example
 * ```ts
 * const table = new CancellationTable({ clock: systemClock })
 * const parent = table.register('a')
 * const child = table.register('a-sub-1', { parent: 'a', deadline: systemClock.now() + 30_000 })
 * table.cancel('a', 'user') // both slots read cancelled; the child's reason is 'parent'
 * table.release('a-sub-1'); table.release('a')
 * ```
 */
export class CancellationTable {
  readonly #local: Segment;
  readonly #clock: Clock;
  readonly #nodes = new Map<string, Node>();
  readonly #withDeadline = new Set<Node>();
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
   * Register run `key`. O(1) (amortised over growth). The deadline is capped
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
    const node: Node = {
      key,
      parent,
      children: undefined,
      deadline: minDeadline(options.deadline, parent?.deadline),
      // Check the ancestors once: a child born while one of them is being (or
      // was) cancelled must not miss it. Invariant: a cancelled run's descendants
      // are cancelled, so the parent's own reason settles it.
      reason: parent?.reason === undefined ? undefined : 'parent',
      segment: undefined,
      handle: undefined,
    };
    if (options.slot !== 'deferred') this.#claim(node, this.#local);
    this.#nodes.set(key, node);
    if (node.deadline !== undefined) this.#withDeadline.add(node);
    if (parent !== undefined) {
      if (parent.children === undefined) parent.children = new Set();
      parent.children.add(node);
    }
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
   * Free run `key`'s slot but keep the run registered (its own work ended;
   * its children may still run, and a cancel of it must still reach them).
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
   * in the slot gets a new generation. Children still registered keep their
   * cancel ancestry: they move up to the released run's parent. Returns false
   * for an unknown or released key.
   */
  release(key: string): boolean {
    const node = this.#nodes.get(key);
    if (node === undefined) return false;
    this.unbind(key);
    this.#nodes.delete(key);
    this.#withDeadline.delete(node);
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
    return true;
  }

  /**
   * Cancel run `key` with `reason` and every live descendant with `parent`.
   * Wakes their `signal` bridges (one ring per buffer). Returns false, without
   * error, for an unknown, released or already cancelled key (the first
   * reason stays).
   */
  cancel(key: string, reason: CancelReason): boolean {
    if (!REASONS.has(reason)) {
      throw new InvalidArgumentError(
        `unknown cancel reason ${JSON.stringify(reason)}: use 'user', 'parent', 'deadline' or 'shutdown'`,
      );
    }
    const node = this.#nodes.get(key);
    if (node === undefined || node.reason !== undefined) return false;
    this.#sweep((touch) => this.#cancelNode(node, reason, undefined, touch));
    return true;
  }

  /**
   * Keys of run `key` and every registered descendant, the run first
   * (for a caller that must act on each: a watchdog's grace periods).
   */
  subtree(key: string): string[] {
    const node = this.#nodes.get(key);
    if (node === undefined) return [];
    const out: string[] = [];
    const stack: Node[] = [node];
    for (let n = stack.pop(); n !== undefined; n = stack.pop()) {
      out.push(n.key);
      if (n.children !== undefined) for (const child of n.children) stack.push(child);
    }
    return out;
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
   * `deadline`; the run goes on). Lane deadlines are read in each segment's
   * lane clock (a worker writes them in the system clock). Returns what it
   * cancelled.
   */
  expire(now: number = this.#clock.now()): ExpiredEntry[] {
    if (typeof now !== 'number' || !Number.isFinite(now)) {
      throw new InvalidArgumentError(`expire(now) needs a finite time in epoch ms, got ${describeValue(now)}`);
    }
    const out: ExpiredEntry[] = [];
    this.#sweep((touch) => {
      for (const node of this.#withDeadline) {
        if (node.deadline !== undefined && node.deadline <= now && node.reason === undefined) {
          this.#cancelNode(node, 'deadline', out, touch);
        }
      }
      if (this.#lanes === 0) return;
      const lanes = this.#laneScratch;
      const systemNow = systemClock.now();
      for (const node of this.#nodes.values()) {
        const segment = node.segment;
        const handle = node.handle;
        if (segment === undefined || handle === undefined) continue;
        touch(segment);
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
    });
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

  /** What the call on `lane` of run `key` is, as the run's thread said (for error messages only). */
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

  laneInfo(key: string, lane: number): { readonly tool: number; readonly timeoutMs: number | undefined } | undefined {
    const node = this.#nodes.get(key);
    if (node?.handle === undefined || node.segment === undefined) return undefined;
    return node.segment.slots.laneInfo(node.handle.index, lane);
  }

  // Run `fn` holding every touched segment's doorbell, then ring each once.
  #sweep(fn: (touch: (segment: Segment) => void) => void): void {
    const touched: Segment[] = [];
    const touch = (segment: Segment): void => {
      if (touched.includes(segment)) return;
      touched.push(segment);
      segment.slots.beginBatch();
    };
    try {
      fn(touch);
    } finally {
      for (const segment of touched) segment.slots.endBatch();
    }
  }

  #cancelNode(node: Node, reason: CancelReason, out: ExpiredEntry[] | undefined, touch: (s: Segment) => void): void {
    this.#write(node, reason, touch);
    if (out !== undefined) out.push({ kind: 'run', key: node.key, reason: 'deadline' });
    if (node.children === undefined) return;
    // Push down. Invariant (kept by every cancel, by register's ancestor check,
    // and by release moving children up): a cancelled run's descendants are
    // all cancelled, so a child that was already cancelled is not descended.
    const stack: Node[] = [];
    for (const child of node.children) stack.push(child);
    for (let child = stack.pop(); child !== undefined; child = stack.pop()) {
      if (child.reason !== undefined) continue;
      this.#write(child, 'parent', touch);
      if (out !== undefined) out.push({ kind: 'run', key: child.key, reason: 'parent' });
      if (child.children !== undefined) for (const grandchild of child.children) stack.push(grandchild);
    }
  }

  #write(node: Node, reason: CancelReason, touch: (s: Segment) => void): void {
    node.reason = reason;
    if (node.segment === undefined || node.handle === undefined) return;
    touch(node.segment);
    node.segment.slots.cancelRun(node.handle, reason);
  }

  #setNodeDeadline(node: Node, deadline: number | undefined): void {
    node.deadline = deadline;
    if (node.segment !== undefined && node.handle !== undefined) {
      node.segment.slots.setRunDeadline(node.handle.index, deadline);
    }
    if (deadline === undefined) this.#withDeadline.delete(node);
    else this.#withDeadline.add(node);
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

function minDeadline(a: number | undefined, b: number | undefined): number | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return a < b ? a : b;
}
