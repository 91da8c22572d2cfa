/// <reference lib="es2024.sharedmemory" />
// See CancelSlots.ts for why only the ES2024 shared-memory typings are referenced.

import { CancelSlots, type SlotHandle } from './CancelSlots.js';
import type { CallCancellation, CallInfo, CancelToken, RunCancellation } from './CancelToken.js';
import type { Clock } from './Clock.js';
import { SettlingToken } from './SettlingToken.js';
import { type CancelReason, ClosedError, InvalidArgumentError } from './TroupeError.js';
import type { Usage } from './Usage.js';

/** Options of {@link slotRunCancellation}. */
export interface SlotRunCancellationOptions {
  /**
   * The run's absolute deadline (epoch ms) as the executor should see it;
   * `null` when the run is known to have none (its task said so), which
   * spares reading the slot. Default: the deadline the supervisor stored in
   * the slot.
   */
  readonly deadline?: number | null | undefined;
  /** When given, a call opened with a deadline already past starts cancelled (`deadline`). */
  readonly clock?: Clock | undefined;
  /**
   * What the run's own `cancel()` does. Default: cancel the run's word in the
   * slot (a worker's run: the supervisor learns it from the run's result and
   * stops its subtree then). The supervisor's own runs pass the run tree's
   * cancel, which records the reason and pushes it down at once.
   */
  readonly onCancel?: ((reason: CancelReason) => void) | undefined;
}

/** A {@link RunCancellation} over a shared slot; `close()` when the run ends. */
export interface SlotRunCancellation extends RunCancellation {
  readonly handle: SlotHandle;
  /**
   * The run ended: close calls still open (freeing their lanes), freeze every
   * token at its current state, and stop the `signal` bridges (the thread's
   * one doorbell waiter lets go at the next ring once no token is bridged).
   * Idempotent. Release the slot on the supervisor only after this (or after
   * the worker running it was killed).
   */
  close(): void;
}

/**
 * The cancellation of one run, read from its slot in the shared cancellation
 * buffer — what a worker builds from the `buffer` and {@link SlotHandle} it
 * was sent, and hands to `executeTool` / the agent loop.
 *
 * - `token.isCancelled()` is one `Atomics.load` of the slot's run word, safe in
 *   a tight loop; the supervisor's cancel (or an ancestor's, pushed down) and
 *   the run's deadline show up there within microseconds, on any thread.
 * - `openCall(deadline)` takes one of the slot's lanes: the call's token reads
 *   the lane word, which the run's cancel also sets, and which the watchdog
 *   sets alone when the call's deadline passes. When every lane is busy the
 *   call falls back to the run word plus an in-process flag: it still sees
 *   the run's cancel and its own `cancel()`, but the watchdog cannot cancel
 *   that call alone.
 * - `token.signal` (and `whenCancelled()`) is created on first use and
 *   bridged through the buffer's doorbell — one `Atomics.waitAsync` per
 *   thread, rung by cancels of watched slots — so it aborts (with a
 *   `CancelledError`) while the thread's event loop is idle: hand it to
 *   `fetch` and model calls. The bridge does not keep the event loop alive.
 * - After `close()`, tokens are frozen: a later cancel has no effect on them.
 *
 * @example
 * ```ts
 * // in a worker: attach once (the buffer came with workerData), then per run,
 * // given the handle the supervisor posted
 * const slots = CancelSlots.attach(workerData.buffer)
 * const run = slotRunCancellation(slots, handle, { clock: systemClock })
 * try {
 *   const call = run.openCall(systemClock.now() + 5_000)
 *   try { while (!call.token.isCancelled()) step() } finally { call.close() }
 * } finally {
 *   run.close()
 * }
 * ```
 */
export function slotRunCancellation(
  buffer: SharedArrayBuffer | CancelSlots,
  handle: SlotHandle,
  options: SlotRunCancellationOptions = {},
): SlotRunCancellation {
  const slots = buffer instanceof CancelSlots ? buffer : CancelSlots.attach(buffer);
  if (
    typeof handle !== 'object' ||
    handle === null ||
    !Number.isSafeInteger(handle.generation) ||
    handle.generation < 1 ||
    handle.generation >= 2 ** 27
  ) {
    throw new InvalidArgumentError(
      `not a slot handle: ${JSON.stringify(handle)}; pass the { index, generation } the table's register() returned`,
    );
  }
  slots.ensure(handle.index);
  if (options.deadline !== null) CancelSlots.checkDeadline(options.deadline, 'the run deadline');
  return new SlotRun(slots, { index: handle.index, generation: handle.generation }, options);
}

/**
 * A token over one word of the slot: live while the word holds `live`.
 * Frozen by `finish()` (the run or call ended): from then on it reports the
 * state it had.
 */
class WordToken extends SettlingToken {
  readonly #words: Int32Array;
  readonly #at: number;
  readonly #live: number;
  readonly #slots: CancelSlots;
  readonly #index: number;
  #finished = false;
  #final: CancelReason | undefined;
  #bridging = false;
  #watcher: DoorbellWatcher | undefined;

  constructor(slots: CancelSlots, index: number, at: number, live: number) {
    super();
    this.#slots = slots;
    this.#index = index;
    this.#words = slots.words;
    this.#at = at;
    this.#live = live;
  }

  isCancelled(): boolean {
    // The hot path is the one load; the rest runs only once the word changed.
    return Atomics.load(this.#words, this.#at) !== this.#live && (!this.#finished || this.#final !== undefined);
  }

  get reason(): CancelReason | undefined {
    if (this.#finished) return this.#final;
    return CancelSlots.reasonOf(Atomics.load(this.#words, this.#at), this.#live);
  }

  protected get ended(): boolean {
    return this.#finished;
  }

  protected watch(): void {
    this.#bridge();
  }

  /** Freeze at `final`, settle the signal and the promise if cancelled, stop the bridge. */
  finish(final: CancelReason | undefined): void {
    if (this.#finished) return;
    this.#final = final;
    this.#finished = true;
    if (final !== undefined) this.settle(final);
    this.#unwatch();
  }

  /** The doorbell rang (or the bridge starts): settle if the word changed. */
  check(): void {
    if (!this.#bridging) return;
    const word = Atomics.load(this.#words, this.#at);
    if (word === this.#live) return;
    this.#unwatch();
    this.settle(CancelSlots.reasonOf(word, this.#live) ?? 'shutdown');
  }

  // One bridge per token, shared by `signal` and `whenCancelled()`: the token
  // joins its thread's doorbell watcher.
  #bridge(): void {
    if (this.#bridging || this.#finished) return;
    this.#bridging = true;
    // Announce the bridge before the first read (see CancelSlots.cancelRun).
    this.#slots.markWaiting(this.#index);
    this.#watcher = doorbellWatcher(this.#slots);
    this.#watcher.add(this);
    this.check();
  }

  #unwatch(): void {
    if (!this.#bridging) return;
    this.#bridging = false;
    this.#watcher?.delete(this);
    this.#watcher = undefined;
  }
}

/**
 * A thread's one waiter on a buffer's doorbell (see {@link CancelSlots.doorbell}):
 * when it rings, every token bridged on this thread re-reads its word. Armed
 * by the first token, it waits while tokens are bridged; once none is left it
 * lets go at the next ring or within {@link RECHECK_MS} (a pending waiter
 * holds the buffer; it does not keep the event loop alive). The periodic
 * re-read also settles, with `shutdown`, a token whose slot was released
 * without the run closing it (nothing rings for a release).
 */
class DoorbellWatcher {
  readonly #doorbell: Int32Array;
  readonly #tokens = new Set<WordToken>();
  #armed = false;
  #seen = 0;

  constructor(slots: CancelSlots) {
    this.#doorbell = slots.doorbell;
  }

  add(token: WordToken): void {
    this.#tokens.add(token);
    if (this.#armed) return;
    this.#armed = true;
    // Read before the token's first check: a ring after this read is seen by the wait.
    this.#seen = Atomics.load(this.#doorbell, 0);
    this.#wait();
  }

  delete(token: WordToken): void {
    this.#tokens.delete(token);
  }

  #wait(): void {
    for (;;) {
      const waited = Atomics.waitAsync(this.#doorbell, 0, this.#seen, RECHECK_MS);
      if (waited.async) {
        waited.value.then(() => this.#rung());
        return;
      }
      // 'not-equal': it rang since the last read.
      if (!this.#checkAll()) return;
    }
  }

  #rung(): void {
    if (this.#checkAll()) this.#wait();
  }

  // Re-read the doorbell, then every token's word; false once nothing is left to watch.
  #checkAll(): boolean {
    this.#seen = Atomics.load(this.#doorbell, 0);
    for (const token of this.#tokens) token.check();
    if (this.#tokens.size > 0) return true;
    this.#armed = false;
    return false;
  }
}

/** How long a doorbell watcher waits before it re-reads its tokens' words anyway. */
const RECHECK_MS = 1000;

// One watcher per buffer object in this thread, whatever CancelSlots views over it
// the runs were given. A buffer posted again arrives as another object, with a
// watcher of its own: send it to a thread once (workerData), not with every run.
const watchers = new WeakMap<SharedArrayBuffer, DoorbellWatcher>();

function doorbellWatcher(slots: CancelSlots): DoorbellWatcher {
  let watcher = watchers.get(slots.buffer);
  if (watcher === undefined) {
    watcher = new DoorbellWatcher(slots);
    watchers.set(slots.buffer, watcher);
  }
  return watcher;
}

/** A call holding a lane of the slot. */
class LaneCall implements CallCancellation {
  readonly token: WordToken;
  readonly #run: SlotRun;
  readonly #lane: number;
  readonly #live: number;
  #closed = false;

  constructor(run: SlotRun, lane: number, live: number) {
    this.#run = run;
    this.#lane = lane;
    this.#live = live;
    this.token = new WordToken(run.slots, run.handle.index, run.slots.laneWordAt(run.handle.index, lane), live);
  }

  cancel(reason: CancelReason): void {
    if (this.#closed) return;
    this.#run.slots.cancelLane(this.#run.handle.index, this.#lane, this.#live, reason);
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    const word = this.#run.slots.closeLane(this.#run.handle.index, this.#lane, this.#live);
    this.token.finish(CancelSlots.reasonOf(word, this.#live));
    this.#run.release(this, this.#lane);
  }
}

/**
 * A call opened while every lane was busy: the run word plus a local flag.
 * Sees the run's cancel and its own; the watchdog cannot cancel it alone.
 */
class FallbackCall extends SettlingToken implements CallCancellation {
  readonly #run: SlotRun;
  #local: CancelReason | undefined;
  #closed = false;
  #final: CancelReason | undefined;
  #following = false;

  constructor(run: SlotRun) {
    super();
    this.#run = run;
  }

  get token(): CancelToken {
    return this;
  }

  isCancelled(): boolean {
    if (this.#closed) return this.#final !== undefined;
    return this.#local !== undefined || this.#run.token.isCancelled();
  }

  get reason(): CancelReason | undefined {
    if (this.#closed) return this.#final;
    return this.#local ?? this.#run.token.reason;
  }

  protected get ended(): boolean {
    return this.#closed;
  }

  // Follow the run token's cancellation (once; a closed call no longer does).
  protected watch(): void {
    if (this.#following || this.#closed) return;
    this.#following = true;
    void this.#run.token.whenCancelled().then((reason) => {
      if (!this.#closed) this.settle(reason);
    });
  }

  cancel(reason: CancelReason): void {
    if (this.#closed || this.#local !== undefined || this.#run.token.isCancelled()) return;
    this.#local = reason;
    this.settle(reason);
  }

  close(): void {
    if (this.#closed) return;
    this.#final = this.reason;
    this.#closed = true;
    if (this.#final !== undefined) this.settle(this.#final);
    this.#run.release(this, undefined);
  }
}

class SlotRun implements SlotRunCancellation {
  readonly slots: CancelSlots;
  readonly handle: SlotHandle;
  readonly token: WordToken;
  readonly deadline: number | undefined;
  readonly #clock: Clock | undefined;
  readonly #onCancel: ((reason: CancelReason) => void) | undefined;
  // Lane ownership is local to this thread, so a bit per lane is enough
  // (at most 16 lanes): no allocation per run for the many runs that never
  // open a call with a deadline.
  readonly #allLanes: number;
  #busyLanes = 0;
  // Made on the first call: a run without tool calls never needs it.
  #open: Set<CallCancellation> | undefined;
  #closed = false;

  constructor(slots: CancelSlots, handle: SlotHandle, options: SlotRunCancellationOptions) {
    this.slots = slots;
    this.handle = handle;
    this.token = new WordToken(slots, handle.index, slots.runWordAt(handle.index), slots.liveValue(handle));
    const deadline = options.deadline;
    this.deadline = deadline === null ? undefined : (deadline ?? slots.runDeadline(handle.index));
    this.#clock = options.clock;
    this.#onCancel = options.onCancel;
    this.#allLanes = (1 << slots.lanes) - 1;
  }

  noteUsage(usage: Usage): void {
    if (!this.#closed) this.slots.noteUsage(this.handle, usage.inputTokens, usage.outputTokens);
  }

  cancel(reason: CancelReason): void {
    if (this.#closed) return;
    if (this.#onCancel !== undefined) this.#onCancel(reason);
    else this.slots.cancelRun(this.handle, reason);
  }

  // The lowest free lane, marked busy; undefined when every lane is taken.
  #takeLane(): number | undefined {
    const free = this.#allLanes & ~this.#busyLanes;
    if (free === 0) return undefined;
    const lane = 31 - Math.clz32(free & -free);
    this.#busyLanes |= 1 << lane;
    return lane;
  }

  openCall(deadline: number | undefined, info?: CallInfo): CallCancellation {
    if (this.#closed) {
      throw new ClosedError('this run cancellation is closed (the run ended): open calls before close()');
    }
    CancelSlots.checkDeadline(deadline, 'the call deadline');
    // Only a call with a deadline needs a lane: the watchdog cancels lanes for
    // their deadline, nothing else does. Without one (a `task` call, say), the
    // call reads the run word and keeps the lanes for calls that time out.
    const lane = deadline === undefined ? undefined : this.#takeLane();
    let call: CallCancellation;
    if (lane === undefined) {
      call = new FallbackCall(this);
    } else {
      const live = this.slots.openLane(
        this.handle,
        lane,
        deadline,
        info === undefined ? undefined : { tool: info.toolIndex, timeoutMs: info.timeoutMs },
      );
      call = new LaneCall(this, lane, live);
    }
    this.#open ??= new Set();
    this.#open.add(call);
    if (deadline !== undefined && this.#clock !== undefined && deadline <= this.#clock.now()) call.cancel('deadline');
    return call;
  }

  /** Called by a call's close(). */
  release(call: CallCancellation, lane: number | undefined): void {
    this.#open?.delete(call);
    if (lane !== undefined) this.#busyLanes &= ~(1 << lane);
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#open !== undefined) for (const call of [...this.#open]) call.close();
    this.token.finish(this.token.reason);
  }
}
