/// <reference lib="es2024.sharedmemory" />
// Node 20 has growable SharedArrayBuffers and Atomics.waitAsync, but the base
// tsconfig targets ES2023 (Node 20 lacks other ES2024 APIs), so only the
// shared-memory typings are pulled in, here and in slotRunCancellation.ts.

import { describeValue } from './internal/describeValue.js';
import { type CancelReason, InvalidArgumentError } from './TroupeError.js';

/**
 * Which slot of a {@link CancelSlots} buffer a run owns, and in which
 * generation. A released slot is reused with the next generation, so a
 * handle of an earlier generation never sees the new run's cancel (it reads
 * as cancelled with reason `shutdown`), and a cancel aimed at it is a no-op.
 * Plain data: post it to a worker with the buffer.
 */
export interface SlotHandle {
  readonly index: number;
  readonly generation: number;
}

/** Options of {@link CancelSlots.create}. */
export interface CancelSlotsOptions {
  /** Slots allocated up front (≥ 1). */
  readonly capacity: number;
  /** Slots the buffer may grow to (≥ `capacity`, ≤ {@link CancelSlots.MAX_CAPACITY}). */
  readonly maxCapacity: number;
  /** Lanes (per-call words) per slot, 0 to {@link CancelSlots.MAX_LANES}. */
  readonly lanes: number;
}

// ── Word encoding ────────────────────────────────────────────────────────────
// A run word is `generation << 4 | code`, a lane word `seq << 4 | code`.
// code 0 = live, 1..4 = the CancelReason, 15 = lane free. A check compares the
// whole word with the live value the reader was handed: one Atomics.load, and
// any change (cancel, release, reuse) reads as "not live".
const CODE_BITS = 4;
const CODE_MASK = 0xf;
const LIVE = 0;
const FREE = 0xf;
/** Largest tag: `tag << 4` stays a positive int32. */
const TAG_MAX = 2 ** 27 - 1;
const REASONS: readonly (CancelReason | undefined)[] = [undefined, 'user', 'parent', 'deadline', 'shutdown'];
const CODES: Readonly<Record<CancelReason, number>> = { user: 1, parent: 2, deadline: 3, shutdown: 4 };

// ── Buffer layout ────────────────────────────────────────────────────────────
// [header: 64 bytes][slot 0][slot 1]...; a slot is a multiple of 64 bytes so two
// slots never share a cache line (a polling worker does not slow its neighbour).
// Slot, in int32 words: RUN, ACTIVITY, (unused), LANE_0..LANE_{L-1}, INFO_0..INFO_{L-1},
// LIMIT_0..LIMIT_{L-1}, padding to 8 bytes;
// then int64 words: RUN_DEADLINE, LANE_DEADLINE_0..L-1 (integer µs since the
// epoch, 0 = none; BigInt64 so Atomics reads them tear-free), USAGE_IN,
// USAGE_OUT (the run's tokens so far, as its worker notes them after each model
// call: read only when the thread dies before the run reports, never authority).
// INFO/LIMIT: what a lane's call is (tool index + 1) and its timeout in ms, so a
// supervisor that kills a call which never yields can say which tool it was.
// ACTIVITY: bit i = lane i is open; bit 16 = a signal bridge watches this slot
// in this generation (sticky until the slot is claimed again).
// Header word H_DOORBELL: rung (incremented and notified) by every cancel of a
// watched slot. Each thread watching any slot keeps one Atomics.waitAsync on
// it and re-checks its own tokens when it rings: no waiter per run, so a run
// that watches its slot costs one Atomics.or instead of a waitAsync and a
// notify (~5 µs of a worker's time per run, a loop turn included).
const MAGIC = 0x54525053; // "TRPS"
const HEADER_BYTES = 64;
const H_MAGIC = 0;
const H_LANES = 1;
const H_STRIDE = 2;
const H_CAPACITY = 3;
const H_MAX_CAPACITY = 4;
const H_DOORBELL = 5;
const RUN = 0;
const ACTIVITY = 1;
const LANE0 = 3;
const WAITERS = 1 << 16;
const MAX_DEADLINE_US = BigInt(Number.MAX_SAFE_INTEGER);

function codeOf(reason: CancelReason): number {
  const code = CODES[reason];
  if (code === undefined) {
    throw new InvalidArgumentError(
      `unknown cancel reason ${JSON.stringify(reason)}: use 'user', 'parent', 'deadline' or 'shutdown'`,
    );
  }
  return code;
}

function reasonOfWord(word: number, live: number): CancelReason | undefined {
  if (word === live) return undefined;
  // Another tag: the slot or lane was released or reused since; the work it
  // belonged to is over.
  if (word >>> CODE_BITS !== live >>> CODE_BITS) return 'shutdown';
  return REASONS[word & CODE_MASK] ?? 'shutdown';
}

/** Epoch ms → the stored integer µs (0 is reserved for "none"). */
function toMicros(ms: number): bigint {
  const us = BigInt(Math.round(ms * 1000));
  if (us < 1n) return 1n;
  return us > MAX_DEADLINE_US ? MAX_DEADLINE_US : us;
}

function fromMicros(us: bigint): number | undefined {
  return us === 0n ? undefined : Number(us) / 1000;
}

function assertDeadline(deadline: unknown, what: string): asserts deadline is number | undefined {
  if (deadline === undefined) return;
  if (typeof deadline !== 'number' || !Number.isFinite(deadline) || deadline < 0) {
    throw new InvalidArgumentError(
      `${what} must be an absolute time in epoch milliseconds (a finite number ≥ 0) or undefined, got ${describeValue(deadline)}`,
    );
  }
}

function lowestBit(mask: number): number {
  return 31 - Math.clz32(mask & -mask);
}

/**
 * The cancellation slots of one supervisor, laid out over one growable
 * `SharedArrayBuffer` that every worker holds. Each slot has a RUN word, a few
 * LANE words (one per tool call in flight, so a call can be cancelled alone),
 * an activity word and absolute deadlines (epoch ms in the `Clock` base,
 * stored as integer µs).
 *
 * Writers: the supervisor thread owns RUN words and run deadlines (claim,
 * cancel, retire — through `CancellationTable`); the one thread running a run
 * owns its lanes (open, close — through {@link slotRunCancellation}); a lane's
 * reason bits are set by whoever cancels it (push-down, deadline, the call's
 * own timeout) with a CAS that never overwrites an earlier reason.
 *
 * A cancel is visible to readers with one `Atomics.load`; ringing the
 * {@link CancelSlots.doorbell} wakes the `Atomics.waitAsync` bridges, and is
 * skipped when no bridge ever watched the slot (a notify costs ~90 ns even
 * with nobody waiting, which would dominate a push-down over 1,000 agents).
 *
 * Trust: any thread holding the buffer can write any word of it. The
 * instance that {@link CancelSlots.create}d the buffer (the owner, on the
 * supervisor) therefore never reads back what it needs to decide anything:
 * it keeps the capacity, the lane count and every slot's generation in its
 * own memory, and a claim overwrites whatever a slot held. Words other
 * threads write (lanes, the activity word) can only mislead their writer's
 * own runs when each thread has a buffer of its own (see `CancellationTable`
 * segments). An attached instance trusts the header its owner wrote.
 *
 * Gotcha: the views are fixed-length (a length-tracking view over a growable
 * buffer makes every `Atomics.load` ~4× slower in Node 20), so an attached
 * instance re-reads the capacity from the header when it meets a slot past
 * its view.
 *
 * @example
 * ```ts
 * const slots = CancelSlots.create({ capacity: 16, maxCapacity: 1024, lanes: 4 })
 * const handle = slots.claim(0)
 * slots.cancelRun(handle, 'user') // true
 * slots.runReason(handle)         // 'user'
 * ```
 */
export class CancelSlots {
  /** The most slots a buffer may hold. */
  static readonly MAX_CAPACITY = 2 ** 24;
  /** The most lanes a slot may have (bits of the activity word). */
  static readonly MAX_LANES = 16;

  /** The reason `word` reports to a reader holding `live`; `shutdown` when the tag differs (released, reused). */
  static reasonOf(word: number, live: number): CancelReason | undefined {
    return reasonOfWord(word, live);
  }

  /** Throws `InvalidArgumentError` unless `deadline` is undefined or epoch ms ≥ 0 (finite). */
  static checkDeadline(deadline: unknown, what = 'deadline'): asserts deadline is number | undefined {
    assertDeadline(deadline, what);
  }

  readonly buffer: SharedArrayBuffer;
  readonly lanes: number;
  readonly maxCapacity: number;
  readonly #strideWords: number;
  readonly #stride64: number;
  /**
   * The activity bits that name this buffer's lanes. The activity word is
   * written by the thread running the slot's run: a bit past the last lane
   * would make a canceller CAS (and the watchdog read) words outside the
   * slot's lanes — its call info, its deadlines, the next slot's run word.
   */
  readonly #laneMask: number;
  readonly #deadline64: number;
  readonly #header: Int32Array;
  readonly #doorbell: Int32Array;
  #words: Int32Array;
  #deadlines: BigInt64Array;
  #covered: number;
  /** Owner only: the capacity as this instance set it (never read back from the header). */
  #capacity: number;
  /** Owner only: each slot's current generation, kept here so a forged word cannot move it. */
  #generations: Uint32Array | undefined;

  private constructor(
    buffer: SharedArrayBuffer,
    owned?: { readonly lanes: number; readonly strideBytes: number; readonly maxCapacity: number; capacity: number },
  ) {
    this.buffer = buffer;
    this.#header = new Int32Array(buffer, 0, HEADER_BYTES / 4);
    this.#doorbell = new Int32Array(buffer, H_DOORBELL * 4, 1);
    this.lanes = owned?.lanes ?? (this.#header[H_LANES] as number);
    const strideBytes = owned?.strideBytes ?? (this.#header[H_STRIDE] as number);
    this.maxCapacity = owned?.maxCapacity ?? (this.#header[H_MAX_CAPACITY] as number);
    this.#strideWords = strideBytes / 4;
    this.#stride64 = strideBytes / 8;
    this.#deadline64 = intBytesOf(this.lanes) / 8;
    this.#laneMask = (1 << this.lanes) - 1;
    this.#covered = -1;
    this.#capacity = owned?.capacity ?? -1;
    this.#generations = owned === undefined ? undefined : new Uint32Array(owned.capacity);
    this.#words = this.#header;
    this.#deadlines = new BigInt64Array(0);
    this.#refresh();
  }

  /** True for the instance that created the buffer (it trusts no word of it). */
  get owned(): boolean {
    return this.#generations !== undefined;
  }

  /**
   * A new buffer with `capacity` slots that can grow to `maxCapacity`. Throws
   * `InvalidArgumentError` for a capacity of 0, a capacity over
   * `maxCapacity`, a `maxCapacity` over {@link CancelSlots.MAX_CAPACITY} or
   * one this process cannot reserve, and lanes outside 0..16.
   */
  static create(options: CancelSlotsOptions): CancelSlots {
    const { capacity, maxCapacity, lanes } = options;
    if (!Number.isSafeInteger(lanes) || lanes < 0 || lanes > CancelSlots.MAX_LANES) {
      throw new InvalidArgumentError(
        `lanes must be an integer from 0 to ${CancelSlots.MAX_LANES}, got ${describeValue(lanes)}`,
      );
    }
    if (!Number.isSafeInteger(maxCapacity) || maxCapacity < 1 || maxCapacity > CancelSlots.MAX_CAPACITY) {
      throw new InvalidArgumentError(
        `maxCapacity must be an integer from 1 to ${CancelSlots.MAX_CAPACITY} slots, got ${describeValue(maxCapacity)}`,
      );
    }
    if (!Number.isSafeInteger(capacity) || capacity < 1 || capacity > maxCapacity) {
      throw new InvalidArgumentError(
        `capacity must be an integer from 1 to maxCapacity (${maxCapacity}) slots, got ${describeValue(capacity)}: the buffer cannot hold more than maxCapacity`,
      );
    }
    const stride = strideOf(lanes);
    let buffer: SharedArrayBuffer;
    try {
      buffer = new SharedArrayBuffer(HEADER_BYTES + capacity * stride, {
        maxByteLength: HEADER_BYTES + maxCapacity * stride,
      });
    } catch (cause) {
      throw new InvalidArgumentError(
        `cannot reserve a cancellation buffer for ${maxCapacity} slots (${HEADER_BYTES + maxCapacity * stride} bytes): lower maxCapacity`,
        { cause },
      );
    }
    const header = new Int32Array(buffer, 0, HEADER_BYTES / 4);
    header[H_LANES] = lanes;
    header[H_STRIDE] = stride;
    header[H_MAX_CAPACITY] = maxCapacity;
    Atomics.store(header, H_CAPACITY, capacity);
    Atomics.store(header, H_MAGIC, MAGIC);
    return new CancelSlots(buffer, { lanes, strideBytes: stride, maxCapacity, capacity });
  }

  /** Attach to a buffer made by {@link CancelSlots.create} (in a worker, say). */
  static attach(buffer: SharedArrayBuffer): CancelSlots {
    if (!(buffer instanceof SharedArrayBuffer) || buffer.byteLength < HEADER_BYTES) {
      throw new InvalidArgumentError('not a cancellation buffer: pass the `buffer` of a CancellationTable');
    }
    const header = new Int32Array(buffer, 0, HEADER_BYTES / 4);
    if (Atomics.load(header, H_MAGIC) !== MAGIC) {
      throw new InvalidArgumentError('not a cancellation buffer: pass the `buffer` of a CancellationTable');
    }
    return new CancelSlots(buffer);
  }

  /** Slots the buffer holds now (it may grow later; every thread sees it). */
  get capacity(): number {
    return this.#generations !== undefined ? this.#capacity : Atomics.load(this.#header, H_CAPACITY);
  }

  /**
   * Grow to `capacity` slots (supervisor thread). Threads already holding the
   * buffer see the new slots; their instances re-read the capacity on demand.
   */
  grow(capacity: number): void {
    const current = this.capacity;
    if (!Number.isSafeInteger(capacity) || capacity <= current || capacity > this.maxCapacity) {
      throw new InvalidArgumentError(
        `cannot grow the cancellation buffer from ${current} to ${String(capacity)} slots: the new capacity must be larger and at most ${this.maxCapacity}`,
      );
    }
    if (this.#generations === undefined) {
      throw new InvalidArgumentError('only the CancelSlots that created a buffer can grow it');
    }
    this.buffer.grow(HEADER_BYTES + capacity * this.#strideWords * 4);
    const generations = new Uint32Array(capacity);
    generations.set(this.#generations);
    this.#generations = generations;
    this.#capacity = capacity;
    // Publish after the bytes exist: a thread that reads the new capacity can view them.
    Atomics.store(this.#header, H_CAPACITY, capacity);
    this.#refresh();
  }

  /**
   * The raw int32 view (fixed length; covers every slot handed out before the
   * last {@link CancelSlots.ensure}). Read it only with `Atomics`. Tokens keep
   * it for their one-load check.
   */
  get words(): Int32Array {
    return this.#words;
  }

  /** Make sure the views cover slot `index`; throws if the buffer has no such slot. */
  ensure(index: number): void {
    if (Number.isSafeInteger(index) && index >= 0 && index < this.#covered) return;
    this.#refresh();
    if (!Number.isSafeInteger(index) || index < 0 || index >= this.#covered) {
      throw new InvalidArgumentError(
        `slot ${String(index)} is outside this cancellation buffer (capacity ${this.#covered}): the handle belongs to another table`,
      );
    }
  }

  /** Index in {@link CancelSlots.words} of slot `index`'s run word. */
  runWordAt(index: number): number {
    return index * this.#strideWords + RUN;
  }

  /** Index in {@link CancelSlots.words} of a lane word. */
  laneWordAt(index: number, lane: number): number {
    return index * this.#strideWords + LANE0 + lane;
  }

  /** The live value of a handle's run word. */
  liveValue(handle: SlotHandle): number {
    return handle.generation << CODE_BITS;
  }

  // ── Run words: supervisor thread ───────────────────────────────────────────

  /**
   * Start a new generation in slot `index` (supervisor thread): lanes free,
   * deadlines cleared, run word live. The previous generation's tokens then
   * read as cancelled (`shutdown`).
   */
  claim(index: number): SlotHandle {
    const generations = this.#generations;
    if (generations === undefined) {
      throw new InvalidArgumentError('only the CancelSlots that created a buffer can claim its slots');
    }
    this.ensure(index);
    const words = this.#words;
    const base = index * this.#strideWords;
    // The generation comes from this instance's memory, never from the word: a
    // forged word cannot make a reused slot inherit a stale handle's cancel.
    const previous = generations[index] as number;
    const generation = previous >= TAG_MAX ? 1 : previous + 1;
    generations[index] = generation;
    for (let lane = 0; lane < this.lanes; lane++) {
      const at = base + LANE0 + lane;
      // Keep the lane's seq so a call token of an earlier generation never
      // matches the next call opened on this lane.
      Atomics.store(words, at, (Atomics.load(words, at) & ~CODE_MASK) | FREE);
    }
    const d = index * this.#stride64 + this.#deadline64;
    // The deadlines, then the two usage words: plain writes (a third of the claim's cost as
    // atomics), published by the atomic store of the live run word below — a thread that reads
    // that value reads these after it (happens-before), and no reader trusts a slot before it.
    this.#deadlines.fill(0n, d, d + this.lanes + 3);
    Atomics.store(words, base + ACTIVITY, 0);
    // Last: the new live value publishes a clean slot.
    Atomics.store(words, base + RUN, generation << CODE_BITS);
    return { index, generation };
  }

  /**
   * The run in this slot ended (supervisor thread): mark it cancelled with
   * reason `shutdown` if still live (lingering work of that run that polls
   * stops) and clear its deadline. The slot is claimed again later.
   *
   * Gotcha: the doorbell is not rung. A run ends after the thread that ran it
   * closed its cancellation (its tokens are frozen) or died, so no bridge
   * watches the slot any more; ringing here would wake every thread's idle
   * doorbell waiter once per run. A token left open sees `shutdown` at its
   * next read, and its signal aborts at the next ring or within a second
   * (its thread's watcher re-reads the words it watches every second).
   */
  retire(handle: SlotHandle): void {
    this.#cancel(handle, 'shutdown', false);
    this.setRunDeadline(handle.index, undefined);
  }

  /**
   * Cancel a run word and every lane open under it, if that word still holds
   * `handle`'s live value; never overwrites an earlier reason and is a no-op
   * for another generation. Returns whether it cancelled. Does not touch other
   * slots: push-down to descendants is `CancellationTable.cancel`'s job, and
   * the table relies on "a cancelled run's descendants are cancelled" — so
   * cancel runs of a table through the table.
   *
   * Push-down race with {@link CancelSlots.openLane} (the two run on different
   * threads; every step is a sequentially consistent atomic):
   *   canceller: (a) write RUN, (b) read ACTIVITY, (c) read and CAS each open LANE.
   *   opener:    (1) set its ACTIVITY bit, (2) store LANE live, (3) read RUN.
   * In the single total order of SC atomics, either (a) precedes (3) — the
   * opener reads the cancelled RUN and cancels its own lane — or (3) precedes
   * (a), so (1) and (2) precede (b) and (c): the canceller sees the bit and the
   * live lane and CASes it (a failed CAS means the lane changed: cancelled by
   * someone, closed, or closed and reopened — a reopen reads RUN after (a) and
   * cancels itself). Either way no lane stays live under a cancelled run.
   * The same argument covers the waiter bit: a bridge sets it before it first
   * reads the word it watches, so either the canceller sees the bit and rings
   * the doorbell (the bridge's thread re-reads the word when it rings), or
   * the bridge's read sees the cancelled word.
   */
  cancelRun(handle: SlotHandle, reason: CancelReason): boolean {
    return this.#cancel(handle, reason, true);
  }

  #cancel(handle: SlotHandle, reason: CancelReason, ring: boolean): boolean {
    const code = codeOf(reason);
    if (handle.index >= this.#covered) this.ensure(handle.index);
    const words = this.#words;
    const base = handle.index * this.#strideWords;
    const live = handle.generation << CODE_BITS;
    if (Atomics.compareExchange(words, base + RUN, live, live | code) !== live) return false; // (a)
    let activity = Atomics.load(words, base + ACTIVITY); // (b)
    const lanes = activity & this.#laneMask;
    let open = lanes;
    while (open !== 0) {
      const lane = lowestBit(open);
      open &= open - 1;
      casCode(words, base + LANE0 + lane, code); // (c)
    }
    // A lane bridge may have set the (sticky) waiter bit after (b) and waited
    // before our CAS on its lane: re-read after the last CAS. With no lane
    // open, (b) already follows (a), which is all the run word's bridge needs.
    if (!ring) return true;
    if (lanes !== 0 && (activity & WAITERS) === 0) activity = Atomics.load(words, base + ACTIVITY);
    if ((activity & WAITERS) !== 0) this.#ring();
    return true;
  }

  /** Whether `handle`'s run is still live (one load). */
  isLive(handle: SlotHandle): boolean {
    if (handle.index >= this.#covered) this.ensure(handle.index);
    return Atomics.load(this.#words, handle.index * this.#strideWords + RUN) === handle.generation << CODE_BITS;
  }

  /** Why `handle`'s run was cancelled, `undefined` while live, `shutdown` once its slot was reused. */
  runReason(handle: SlotHandle): CancelReason | undefined {
    if (handle.index >= this.#covered) this.ensure(handle.index);
    const word = Atomics.load(this.#words, handle.index * this.#strideWords + RUN);
    return reasonOfWord(word, handle.generation << CODE_BITS);
  }

  /** Set or clear (`undefined`) slot `index`'s run deadline, epoch ms. */
  setRunDeadline(index: number, deadline: number | undefined): void {
    assertDeadline(deadline, 'deadline');
    this.ensure(index);
    Atomics.store(
      this.#deadlines,
      index * this.#stride64 + this.#deadline64,
      deadline === undefined ? 0n : toMicros(deadline),
    );
  }

  /** Slot `index`'s run deadline in epoch ms (µs precision), if any. */
  runDeadline(index: number): number | undefined {
    this.ensure(index);
    return fromMicros(Atomics.load(this.#deadlines, index * this.#stride64 + this.#deadline64));
  }

  /**
   * Cancel (reason `deadline`) every open, live lane of `handle` whose
   * deadline is at or before `now` (epoch ms). Pushes `lane, call` pairs for
   * each lane it cancelled onto `out` (`call` tells that call apart from later
   * calls on the same lane, see {@link CancelSlots.isLaneHeld}).
   */
  expireLanes(handle: SlotHandle, now: number, out: number[]): void {
    if (handle.index >= this.#covered) this.ensure(handle.index);
    const words = this.#words;
    const base = handle.index * this.#strideWords;
    const activity = Atomics.load(words, base + ACTIVITY);
    let open = activity & this.#laneMask;
    if (open === 0) return;
    const nowUs = toMicros(now);
    const d = handle.index * this.#stride64 + this.#deadline64 + 1;
    while (open !== 0) {
      const lane = lowestBit(open);
      open &= open - 1;
      const at = base + LANE0 + lane;
      // Read the lane word before its deadline: the deadline then belongs to
      // this call or is 0 (the owner stores LANE before the deadline when it
      // opens, and clears the deadline only after freeing LANE), and the CAS
      // below fails if the call closed or another opened meanwhile.
      const word = Atomics.load(words, at);
      if ((word & CODE_MASK) !== LIVE) continue;
      const deadline = Atomics.load(this.#deadlines, d + lane);
      if (deadline === 0n || deadline > nowUs) continue;
      if (Atomics.compareExchange(words, at, word, word | CODES.deadline) !== word) continue;
      if ((activity & WAITERS) !== 0 || (Atomics.load(words, base + ACTIVITY) & WAITERS) !== 0) this.#ring();
      out.push(lane, word >>> CODE_BITS);
    }
  }

  /** Whether `lane` of `handle` still holds call `call` (open, not yet closed). */
  isLaneHeld(handle: SlotHandle, lane: number, call: number): boolean {
    if (!Number.isSafeInteger(lane) || lane < 0 || lane >= this.lanes) return false;
    if (handle.index >= this.#covered) this.ensure(handle.index);
    const base = handle.index * this.#strideWords;
    // Another generation: the run is gone, and so are its calls.
    if (Atomics.load(this.#words, base + RUN) >>> CODE_BITS !== handle.generation) return false;
    const word = Atomics.load(this.#words, base + LANE0 + lane);
    if (word >>> CODE_BITS !== call || (word & CODE_MASK) === FREE) return false;
    return Atomics.load(this.#deadlines, handle.index * this.#stride64 + this.#deadline64 + 1 + lane) !== 0n;
  }

  // ── Lanes: the thread running the run ──────────────────────────────────────

  /**
   * Open `lane` (which the caller owns and knows to be free) for a call of
   * `handle`'s run with an optional absolute deadline. Returns the lane's live
   * value. If the run is already cancelled, the lane starts cancelled with the
   * same reason — see the race argument on {@link CancelSlots.cancelRun}.
   */
  openLane(
    handle: SlotHandle,
    lane: number,
    deadline: number | undefined,
    info?: { readonly tool: number; readonly timeoutMs: number | undefined },
  ): number {
    if (handle.index >= this.#covered) this.ensure(handle.index);
    const words = this.#words;
    const base = handle.index * this.#strideWords;
    const at = base + LANE0 + lane;
    // Written before the lane goes live: a reader that sees the call sees what it is.
    Atomics.store(words, base + LANE0 + this.lanes + lane, info === undefined ? 0 : info.tool + 1);
    Atomics.store(
      words,
      base + LANE0 + 2 * this.lanes + lane,
      info?.timeoutMs === undefined ? 0 : Math.min(2 ** 31 - 1, Math.max(0, Math.round(info.timeoutMs))),
    );
    Atomics.or(words, base + ACTIVITY, 1 << lane); // (1)
    const previous = Atomics.load(words, at);
    const seq = previous >>> CODE_BITS >= TAG_MAX ? 0 : (previous >>> CODE_BITS) + 1;
    const live = seq << CODE_BITS;
    // A free lane is never CASed by cancellers (they only touch code 0), so a
    // plain atomic store cannot lose a concurrent write.
    Atomics.store(words, at, live); // (2)
    Atomics.store(
      this.#deadlines,
      handle.index * this.#stride64 + this.#deadline64 + 1 + lane,
      deadline === undefined ? 0n : toMicros(deadline),
    );
    const run = Atomics.load(words, base + RUN); // (3)
    const runLive = handle.generation << CODE_BITS;
    if (run !== runLive) {
      const reason = reasonOfWord(run, runLive) ?? 'shutdown';
      Atomics.compareExchange(words, at, live, live | CODES[reason]);
    }
    return live;
  }

  /**
   * Note run `handle`'s tokens so far (the worker, after each model call): kept
   * in its slot while the slot is still that run's, so a supervisor whose
   * thread died before the run reported can still count them. A worker's
   * claim, like the usage of its result: never authority.
   */
  noteUsage(handle: SlotHandle, inputTokens: number, outputTokens: number): void {
    if (!this.isLive(handle)) return;
    const u = handle.index * this.#stride64 + this.#deadline64 + 1 + this.lanes;
    Atomics.store(this.#deadlines, u, tokens(inputTokens));
    Atomics.store(this.#deadlines, u + 1, tokens(outputTokens));
  }

  /** The tokens noted in slot `index` since it was last claimed (see {@link CancelSlots.noteUsage}). */
  usageOf(index: number): { readonly inputTokens: number; readonly outputTokens: number } {
    this.ensure(index);
    const u = index * this.#stride64 + this.#deadline64 + 1 + this.lanes;
    return {
      inputTokens: count(Atomics.load(this.#deadlines, u)),
      outputTokens: count(Atomics.load(this.#deadlines, u + 1)),
    };
  }

  /**
   * What the call on `lane` of slot `index` is, as its opener said: the tool's
   * index in its agent's tools and its timeout; `undefined` when not told.
   */
  laneInfo(index: number, lane: number): { readonly tool: number; readonly timeoutMs: number | undefined } | undefined {
    if (!Number.isSafeInteger(lane) || lane < 0 || lane >= this.lanes) return undefined;
    this.ensure(index);
    const base = index * this.#strideWords;
    const tool = Atomics.load(this.#words, base + LANE0 + this.lanes + lane);
    if (tool === 0) return undefined;
    const timeoutMs = Atomics.load(this.#words, base + LANE0 + 2 * this.lanes + lane);
    return { tool: tool - 1, timeoutMs: timeoutMs === 0 ? undefined : timeoutMs };
  }

  /**
   * Cancel the call holding `lane` with value `live` only (its own timeout,
   * say). A no-op once that call closed or was cancelled. Returns whether it
   * cancelled.
   */
  cancelLane(index: number, lane: number, live: number, reason: CancelReason): boolean {
    const code = codeOf(reason);
    if (index >= this.#covered) this.ensure(index);
    const words = this.#words;
    const at = this.laneWordAt(index, lane);
    if (Atomics.compareExchange(words, at, live, live | code) !== live) return false;
    if ((Atomics.load(words, index * this.#strideWords + ACTIVITY) & WAITERS) !== 0) this.#ring();
    return true;
  }

  /**
   * Free `lane` if it still holds the call with value `live`; returns the
   * word the call held when it was freed (its final state), or the word found
   * if it no longer holds that call.
   */
  closeLane(index: number, lane: number, live: number): number {
    if (index >= this.#covered) this.ensure(index);
    const words = this.#words;
    const base = index * this.#strideWords;
    const at = base + LANE0 + lane;
    let word = Atomics.load(words, at);
    for (;;) {
      if (word >>> CODE_BITS !== live >>> CODE_BITS || (word & CODE_MASK) === FREE) return word;
      const seen = Atomics.compareExchange(words, at, word, (word & ~CODE_MASK) | FREE);
      if (seen === word) break;
      word = seen;
    }
    Atomics.store(this.#deadlines, index * this.#stride64 + this.#deadline64 + 1 + lane, 0n);
    Atomics.and(words, base + ACTIVITY, ~(1 << lane));
    return word;
  }

  /**
   * Announce that a bridge watches slot `index`, so cancels of this
   * generation ring the doorbell. Call before the bridge first reads the word
   * it watches (see {@link CancelSlots.cancelRun} for why that order suffices).
   */
  markWaiting(index: number): void {
    if (index >= this.#covered) this.ensure(index);
    Atomics.or(this.#words, index * this.#strideWords + ACTIVITY, WAITERS);
  }

  /**
   * The doorbell: a one-word view every cancel of a watched slot increments
   * and notifies. A thread watching slots waits on `doorbell[0]` with
   * `Atomics.waitAsync` (one waiter per thread, not one per slot) and, when
   * it rings, re-reads the words it watches.
   */
  get doorbell(): Int32Array {
    return this.#doorbell;
  }

  /**
   * Ring the doorbell: every thread watching this buffer re-reads the words
   * it watches, and a thread's watcher with nothing left to watch lets go of
   * its waiter — which otherwise holds the buffer until the next cancel of a
   * watched slot. Call it when the buffer is no longer used (a pool does, on
   * close).
   */
  wakeWatchers(): void {
    this.#ring();
  }

  /**
   * Run `fn` with the doorbell rung at most once, after it: for a sweep that
   * cancels many slots (a push-down, the watchdog's deadline pass). Waiters
   * re-read every word they watch when it rings, so one ring after the last
   * cancel wakes them all.
   */
  batch<T>(fn: () => T): T {
    this.#batching++;
    try {
      return fn();
    } finally {
      this.endBatch();
    }
  }

  /**
   * Hold the doorbell until the matching {@link CancelSlots.endBatch}: for a
   * sweep over several buffers, where one `batch` callback cannot hold them all.
   */
  beginBatch(): void {
    this.#batching++;
  }

  /** End a {@link CancelSlots.beginBatch}: rings once if a cancel wanted to. */
  endBatch(): void {
    if (--this.#batching === 0 && this.#ringPending) {
      this.#ringPending = false;
      this.#ring();
    }
  }

  #batching = 0;
  #ringPending = false;

  #ring(): void {
    if (this.#batching > 0) {
      this.#ringPending = true;
      return;
    }
    Atomics.add(this.#doorbell, 0, 1);
    Atomics.notify(this.#doorbell, 0);
  }

  #refresh(): void {
    // The owner never reads the capacity back: a forged header must not make it view past the buffer.
    const capacity = this.#generations !== undefined ? this.#capacity : Atomics.load(this.#header, H_CAPACITY);
    if (capacity === this.#covered) return;
    this.#words = new Int32Array(this.buffer, HEADER_BYTES, capacity * this.#strideWords);
    this.#deadlines = new BigInt64Array(this.buffer, HEADER_BYTES, capacity * this.#stride64);
    this.#covered = capacity;
  }
}

/** Set `code` on a word whose code is 0 (live); leaves an earlier reason alone. */
function casCode(words: Int32Array, at: number, code: number): void {
  let word = Atomics.load(words, at);
  while ((word & CODE_MASK) === LIVE) {
    const seen = Atomics.compareExchange(words, at, word, word | code);
    if (seen === word) return;
    word = seen;
  }
}

function intBytesOf(lanes: number): number {
  return Math.ceil(((LANE0 + 3 * lanes) * 4) / 8) * 8;
}

function strideOf(lanes: number): number {
  return Math.ceil((intBytesOf(lanes) + 8 * (3 + lanes)) / 64) * 64;
}

const MAX_TOKENS = BigInt(Number.MAX_SAFE_INTEGER);

function tokens(n: number): bigint {
  return Number.isSafeInteger(n) && n > 0 ? BigInt(n) : 0n;
}

function count(v: bigint): number {
  return v <= 0n ? 0 : v >= MAX_TOKENS ? Number.MAX_SAFE_INTEGER : Number(v);
}
