import type { ResourceLimits } from 'node:worker_threads';
import { type CancelReason, ClosedError, InvalidArgumentError, NO_USAGE } from '@troupe/core';
import { decodeSubagentResult, parseHostEvents } from '@troupe/core/internal';
import { z } from 'zod';
import { CancellationTable } from './CancellationTable.js';
import { Dispatcher } from './internal/Dispatcher.js';
import { HostChannel, type HostLookup } from './internal/HostChannel.js';
import { LocalAttempt, type LocalAttemptOwner } from './internal/LocalAttempt.js';
import { RecentMap } from './internal/RecentMap.js';
import { type ThreadInfo, WorkerPool } from './internal/WorkerPool.js';
import type { WorkerEnd } from './internal/workerEnd.js';
import type {
  Attempt,
  AttemptEnd,
  AttemptHandle,
  RunTransport,
  TransportHost,
  TransportStats,
} from './RunTransport.js';
import { Watchdog, type WatchdogKillCause } from './Watchdog.js';

/** Deltas a result's tail may carry (a worker batches at most 64 per message it posts). */
const MAX_TAIL_DELTAS = 4096;

/**
 * Options of the local transport: the worker threads of this process that run
 * subagents (`createSupervisor({ pool })` or `localTransport(options)`).
 *
 * @example
 * ```ts
 * const pool: LocalTransportOptions = { threads: 2, maxQueue: 256, resourceLimits: { maxOldGenerationSizeMb: 256 } }
 * const supervisor = createSupervisor({ pool })
 * ```
 */
export interface LocalTransportOptions {
  /** Worker threads, started up front (default: the machine's available parallelism). */
  readonly threads?: number;
  /** Per-worker V8 limits; a worker over its heap limit dies and its run ends `crashed`. */
  readonly resourceLimits?: ResourceLimits;
  /** Runs that may wait for a thread; past it a spawn is refused with a `BackpressureError` (default 1024). */
  readonly maxQueue?: number;
  /**
   * How long a cancelled run may take to stop before its worker is killed (default 1000 ms); also
   * how long `close()`, `destroy()` and `stopAgent()` wait for a reply still being saved.
   */
  readonly graceMs?: number;
  /** How often the watchdog looks at deadlines while runs are in flight (default 10 ms). */
  readonly watchdogIntervalMs?: number;
  /** Initial capacity of the cancellation slots (they grow). */
  readonly tableCapacity?: number;
  /** Host-channel messages a worker may send per second before it counts as a flood and is recycled (default 50,000). */
  readonly floodLimit?: number;
}

/** The longest a Node.js timer waits (longer ones fire at once). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** The options of {@link LocalTransportOptions}, as one schema: checked once, at the edge. */
const LocalTransportSchema = z
  .object({
    threads: z.number().int().min(1).max(256).optional(),
    resourceLimits: z
      .object({
        maxOldGenerationSizeMb: z.number().positive().optional(),
        maxYoungGenerationSizeMb: z.number().positive().optional(),
        codeRangeSizeMb: z.number().positive().optional(),
        stackSizeMb: z.number().positive().optional(),
      })
      .strict()
      .optional(),
    maxQueue: z.number().int().min(0).optional(),
    // A timer longer than 2^31 - 1 ms fires at once: a longer grace would not wait at all.
    graceMs: z.number().finite().min(0).max(MAX_TIMER_MS).optional(),
    watchdogIntervalMs: z.number().finite().min(1).max(MAX_TIMER_MS).optional(),
    tableCapacity: z.number().int().positive().optional(),
    floodLimit: z.number().int().positive().optional(),
  })
  .strict();

/** {@link LocalTransportOptions} checked and defaulted. *
 * @example
 * ```ts
 * const options: ResolvedLocalTransportOptions = localTransport({ threads: 2 }).options
 * console.log(options.graceMs) // 1000, the default
 * ```
 */
export interface ResolvedLocalTransportOptions {
  readonly threads: number | undefined;
  readonly resourceLimits: ResourceLimits | undefined;
  readonly maxQueue: number;
  readonly graceMs: number;
  readonly watchdogIntervalMs: number;
  readonly tableCapacity: number | undefined;
  readonly floodLimit: number | undefined;
}

/**
 * Check and default the local transport's options (`where` names them in errors:
 * `pool`, or `localTransport`). Throws an `InvalidArgumentError` naming the first
 * option that is wrong and why.
 */
export function resolveLocalTransportOptions(
  options: LocalTransportOptions | undefined,
  where = 'pool',
): ResolvedLocalTransportOptions {
  if (options === null) {
    throw new InvalidArgumentError(`invalid option ${where}: null is not options; leave ${where} out for the defaults`);
  }
  const parsed = LocalTransportSchema.safeParse(options ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new InvalidArgumentError(
      `invalid option ${where}.${issue?.path.join('.') || ''}: ${issue?.message ?? 'invalid'}`,
      { cause: parsed.error },
    );
  }
  const p = parsed.data;
  return Object.freeze({
    threads: p.threads,
    resourceLimits: p.resourceLimits as ResourceLimits | undefined,
    maxQueue: p.maxQueue ?? 1024,
    graceMs: p.graceMs ?? 1000,
    watchdogIntervalMs: p.watchdogIntervalMs ?? 10,
    tableCapacity: p.tableCapacity,
    floodLimit: p.floodLimit,
  });
}

/** What the transport builds when its supervisor starts it. */
interface Started {
  readonly host: TransportHost;
  readonly table: CancellationTable;
  readonly pool: WorkerPool;
  readonly channel: HostChannel<ThreadInfo>;
  readonly watchdog: Watchdog;
  readonly dispatcher: Dispatcher;
}

/**
 * Runs attempts on a warm pool of worker threads in this process (piscina):
 * the default transport. Each thread has its own cancellation buffer (a
 * run's slot is bound in it when piscina hands the thread its task), its own
 * host channel (a call presents the capability of an attempt that runs on
 * that very thread), and the watchdog kills a thread whose run ignores a
 * cancel past the grace period or whose tool call overran its deadline
 * without yielding (the pool replaces it). Every event an attempt posted is
 * handed to the tree before its end.
 *
 * Made by {@link localTransport} (or by `createSupervisor({ pool })`); the
 * supervisor that is given it starts it, and closes or destroys it with itself.
 *
 * @example
 * ```ts
 * const transport: LocalTransport = localTransport({ threads: 2, maxQueue: 64 })
 * const supervisor = createSupervisor({ transport })
 * console.log(transport.name, transport.graceMs)
 * ```
 */
export class LocalTransport implements RunTransport, LocalAttemptOwner {
  readonly name = 'local';
  readonly options: ResolvedLocalTransportOptions;
  #s: Started | undefined;
  /** Attempts dispatched and not ended, by run. */
  readonly #byRun = new Map<string, LocalAttempt>();
  /** Attempts bound to a thread, by capability: what a host call presents. */
  readonly #byCapability = new Map<string, LocalAttempt>();
  /** Capabilities of ended attempts that used their channel: only their own late work presents them. */
  readonly #ended = new RecentMap<
    string,
    { readonly agentId: string; readonly runId: string; readonly thread: ThreadInfo | undefined }
  >(1024);
  /** Attempts dispatched and not ended. */
  #inFlight = 0;
  #completed = 0;
  #destroyed = false;
  #closing = false;

  constructor(options: ResolvedLocalTransportOptions) {
    this.options = options;
  }

  get graceMs(): number {
    return this.options.graceMs;
  }

  get slots(): number {
    return this.#started().pool.size;
  }

  /** The worker pool (for Troupe's own tests and the supervisor's figures). */
  get pool(): WorkerPool {
    return this.#started().pool;
  }

  /** The cancellation slots of the worker threads. */
  get table(): CancellationTable {
    return this.#started().table;
  }

  #started(): Started {
    if (this.#s === undefined)
      throw new ClosedError('the local transport was not started: give it to createSupervisor');
    return this.#s;
  }

  start(host: TransportHost): void {
    if (this.#s !== undefined) {
      throw new InvalidArgumentError('this transport is started already: give each supervisor a transport of its own');
    }
    const o = this.options;
    const clock = host.clock;
    const table = new CancellationTable({
      clock,
      ...(o.tableCapacity === undefined ? {} : { capacity: o.tableCapacity }),
    });
    const channel = new HostChannel<ThreadInfo>({
      clock,
      lookup: (capability, thread) => this.#lookup(capability, thread),
      recycle: (thread, reason) => this.#recycle(thread, reason),
      refused: (refusal) => {
        if (host.listening('host.refused')) host.emit('host.refused', refusal);
      },
      floodLimit: o.floodLimit,
    });
    const pool = new WorkerPool({
      threads: o.threads,
      resourceLimits: o.resourceLimits,
      // The queue is the pool's own (runs wait there, not in piscina): piscina's is a backstop.
      maxQueue: o.maxQueue + (o.threads ?? 64),
      table,
      onHostPort: (thread, port) => channel.bind(thread, port),
      onViolation: (thread, reason) => {
        this.#recycle(thread, `it sent ${reason}`);
        if (host.listening('host.refused')) {
          host.emit('host.refused', {
            threadId: thread.id,
            reason,
            op: undefined,
            agentId: undefined,
            runId: undefined,
            recycled: true,
            at: clock.now(),
          });
        }
      },
      onThreadGone: () => {},
    });
    const watchdog = new Watchdog({
      table,
      clock,
      graceMs: o.graceMs,
      intervalMs: o.watchdogIntervalMs,
      kill: (key, cause) => this.#kill(key, cause),
    });
    const dispatcher = new Dispatcher({ pool, table, clock, destroyed: () => this.#destroyed });
    this.#s = { host, table, pool, channel, watchdog, dispatcher };
  }

  ready(): Promise<void> {
    return this.#started().pool.ready();
  }

  canQueue(): boolean {
    const pool = this.#started().pool;
    return pool.queued < this.options.maxQueue || this.#inFlight < pool.size;
  }

  // Not async: one `then` on the pool's promise, no async frame per run.
  dispatch(spec: Attempt): AttemptHandle {
    const s = this.#started();
    const key = spec.runId;
    s.table.register(key, { slot: 'deferred' });
    if (spec.timeoutMs !== undefined) s.table.setDeadline(key, s.host.clock.now() + spec.timeoutMs);
    if (spec.cancelled !== undefined) s.table.cancel(key, spec.cancelled);
    const wire = s.dispatcher.wireOf(spec.scope);
    const attempt = new LocalAttempt(spec, s.dispatcher.tuple(spec, wire), wire, this);
    this.#inFlight++;
    this.#byRun.set(key, attempt);
    if (this.#closing) {
      // A transport that closes takes nothing new: the attempt ends as a shutdown cancelled it.
      s.table.release(key);
      this.#end(attempt, { end: { status: 'cancelled', reason: 'shutdown', forced: false }, usage: NO_USAGE });
      return attempt;
    }
    s.pool.run(attempt.tuple, attempt).then(
      (raw) => this.#answered(attempt, s.dispatcher.fromResult(raw, attempt)),
      async (error: unknown) => {
        const thread = attempt.thread;
        // An uncaught error is reported before the thread's exit: wait for the exit code.
        if (
          thread !== undefined &&
          thread.exitCode === undefined &&
          (thread.error !== undefined || thread.recycled !== undefined)
        ) {
          await thread.exited;
        }
        this.#answered(attempt, s.dispatcher.fromRejection(error, attempt));
      },
    );
    return attempt;
  }

  /** The dispatch moment (called by the attempt, inside piscina's balancer: must not throw). */
  bind(attempt: LocalAttempt, thread: ThreadInfo): void {
    const s = this.#s as Started;
    attempt.thread = thread;
    // No slot (the thread's buffer is full): the worker refuses the task.
    if (!s.dispatcher.bind(attempt, thread)) return;
    const key = attempt.spec.runId;
    // From now on the attempt's capability is good on this thread's channel, and only there.
    this.#byCapability.set(attempt.spec.capability, attempt);
    s.watchdog.track(key);
    if (s.table.isCancelled(key)) s.watchdog.cancelled(key);
    attempt.spec.placed?.({ threadId: thread.id, at: s.host.clock.now() });
  }

  withdraw(handle: AttemptHandle): boolean {
    const attempt = handle as LocalAttempt;
    if (attempt.done || attempt.thread !== undefined) return false;
    return this.#started().pool.withdraw(attempt);
  }

  cancel(handle: AttemptHandle, reason: CancelReason): void {
    const attempt = handle as LocalAttempt;
    if (attempt.done) return;
    const s = this.#started();
    const key = attempt.spec.runId;
    s.table.cancel(key, reason);
    // Still waiting for a thread: it leaves the queue and ends now, without starting.
    if (attempt.thread === undefined) s.pool.withdraw(attempt);
    else s.watchdog.cancelled(key);
  }

  kill(handle: AttemptHandle, reason: CancelReason): void {
    const attempt = handle as LocalAttempt;
    if (attempt.done) return;
    const s = this.#started();
    s.table.cancel(attempt.spec.runId, reason);
    if (attempt.thread === undefined) s.pool.withdraw(attempt);
    else this.#kill(attempt.spec.runId, { kind: 'cancelled', reason });
  }

  stats(): TransportStats {
    const s = this.#s;
    return {
      slots: s?.pool.size ?? 0,
      queued: s?.pool.queued ?? 0,
      running: this.#inFlight - (s?.pool.queued ?? 0),
      completed: this.#completed,
      refused: s?.channel.refusals ?? 0,
      threads: s?.pool.threads ?? 0,
      openPorts: s?.pool.openPorts ?? 0,
      tableSize: s?.table.size ?? 0,
    };
  }

  async close(options: { readonly drainMs: number }): Promise<void> {
    const s = this.#s;
    this.#closing = true;
    if (s === undefined) return;
    if (this.#inFlight > 0) {
      // What still runs gets the drain budget, then is killed (the supervisor cancelled it already).
      let timer: unknown;
      await new Promise<void>((resolve) => {
        this.#drained = resolve;
        timer = s.host.clock.setTimeout(resolve, options.drainMs);
      });
      s.host.clock.clearTimeout(timer);
      this.#drained = undefined;
      for (const attempt of [...this.#byRun.values()]) this.kill(attempt, 'shutdown');
    }
    s.watchdog.close();
    await s.pool.close();
  }

  #drained: (() => void) | undefined;

  async destroy(): Promise<void> {
    this.#closing = true;
    this.#destroyed = true;
    const s = this.#s;
    if (s === undefined) return;
    s.watchdog.close();
    await s.pool.destroy();
  }

  // The worker answered (or its thread died): wait for the events it says it posted, then end it.
  #answered(attempt: LocalAttempt, we: WorkerEnd): void {
    const s = this.#s as Started;
    const thread = attempt.thread;
    s.watchdog.untrack(attempt.spec.runId);
    // Every event the run posted arrives before its outcome is handled.
    if (
      attempt.received < we.sent &&
      thread !== undefined &&
      thread.exitCode === undefined &&
      thread.recycled === undefined
    ) {
      // A promise, not a callback: its reaction runs in this run's async context (the one
      // the dispatch came from, which a host's tracing follows), not the message handler's.
      new Promise<void>((resolve) => {
        attempt.expect = { sent: we.sent, resolve };
        // A worker that claims more than it sent gets the grace period, not more.
        attempt.expectTimer = s.host.clock.setTimeout(() => {
          if (attempt.expect !== undefined) {
            attempt.expect = undefined;
            resolve();
          }
        }, this.options.graceMs);
      }).then(() => this.#settle(attempt, we));
      return;
    }
    this.#settle(attempt, we);
  }

  #settle(attempt: LocalAttempt, we: WorkerEnd): void {
    const s = this.#s as Started;
    const thread = attempt.thread;
    // Its last events came with the result: after the batches it posted, before its outcome.
    if (we.tail !== undefined && thread?.recycled === undefined) tailEvents(attempt, we.tail);
    const held = attempt.held;
    attempt.held = undefined;
    let end: AttemptEnd = we;
    if (held !== undefined && (we.end.status === 'crashed' || attempt.kill !== undefined)) {
      // The worker finished the run, then was recycled for the work it left behind.
      end = held;
    }
    const capability = attempt.spec.capability;
    if (this.#byCapability.get(capability) === attempt) {
      this.#byCapability.delete(capability);
      // Only a run that used its channel can have late messages on it.
      if (attempt.talked) {
        this.#ended.set(capability, { agentId: attempt.spec.agentId, runId: attempt.spec.runId, thread });
      }
    }
    // Its thread is done with its slot: freed before anything can resume the run on another thread.
    s.table.release(attempt.spec.runId);
    this.#end(attempt, end);
  }

  #end(attempt: LocalAttempt, end: AttemptEnd): void {
    this.#inFlight--;
    this.#byRun.delete(attempt.spec.runId);
    this.#completed++;
    attempt.finish(end);
    if (this.#inFlight === 0) this.#drained?.();
  }

  counted(attempt: LocalAttempt): void {
    attempt.received++;
    const expect = attempt.expect;
    if (expect !== undefined && attempt.received >= expect.sent) {
      attempt.expect = undefined;
      if (attempt.expectTimer !== undefined) this.#started().host.clock.clearTimeout(attempt.expectTimer);
      expect.resolve();
    }
  }

  holding(attempt: LocalAttempt, raw: unknown): string | undefined {
    const parsed = decodeSubagentResult(raw, true);
    if (parsed.error !== undefined) return parsed.error;
    this.counted(attempt);
    attempt.held = parsed.result;
    // The run is over; its thread is not free until the work it left settles.
    this.#started().watchdog.cancelled(attempt.spec.runId);
    return undefined;
  }

  #lookup(capability: string, thread: ThreadInfo): HostLookup {
    const attempt = this.#byCapability.get(capability);
    if (attempt !== undefined) {
      // Issued, but to another thread: it was stolen.
      if (attempt.thread !== thread) return { kind: 'unknown' };
      attempt.talked = true;
      return { kind: 'run', run: attempt };
    }
    const ended = this.#ended.get(capability);
    // Ended on another thread: this thread never had it (stolen, through something two runs share).
    if (ended !== undefined && ended.thread !== thread) return { kind: 'unknown' };
    if (ended !== undefined) {
      // A call of a run that ended (its result overtook it on another port, or a shutdown ended
      // it) is expected when nothing else runs on its thread; presented while another run is
      // live there, it may be that run reaching for an earlier one's authority: reported.
      let live = false;
      for (const a of this.#byCapability.values()) {
        if (a.thread === thread) {
          live = true;
          break;
        }
      }
      return { kind: 'stale', agentId: ended.agentId, runId: ended.runId, quiet: !live };
    }
    return { kind: 'unknown' };
  }

  #kill(key: string, cause: WatchdogKillCause): void {
    const s = this.#s as Started;
    const attempt = this.#byRun.get(key);
    const thread = attempt?.thread;
    if (attempt === undefined || thread === undefined || attempt.kill !== undefined) return;
    attempt.kill = cause;
    s.pool.recycle(
      thread,
      cause.kind === 'lane-timeout'
        ? 'a tool call overran its timeout without yielding'
        : 'its run ignored a cancel past the grace period',
    );
    if (s.host.listening('worker.recycled')) {
      s.host.emit('worker.recycled', {
        threadId: thread.id,
        agentId: attempt.spec.agentId,
        runId: attempt.spec.runId,
        reason: cause.kind === 'lane-timeout' ? 'tool-timeout' : 'cancel-ignored',
        at: s.host.clock.now(),
      });
    }
  }

  #recycle(thread: ThreadInfo, reason: string): void {
    const s = this.#s as Started;
    if (thread.recycled !== undefined) return;
    s.pool.recycle(thread, reason);
    if (s.host.listening('worker.recycled')) {
      let agentId: string | undefined;
      let runId: string | undefined;
      for (const attempt of this.#byCapability.values()) {
        if (attempt.thread === thread) {
          agentId = attempt.spec.agentId;
          runId = attempt.spec.runId;
        }
      }
      s.host.emit('worker.recycled', {
        threadId: thread.id,
        agentId,
        runId,
        reason: 'protocol',
        detail: reason,
        at: s.host.clock.now(),
      });
    }
  }
}

// A result's tail of events: telemetry and deltas only (a worker posts a question at once, never
// in a tail), at most MAX_TAIL_DELTAS deltas; anything else drops the tail (telemetry is best-effort).
function tailEvents(attempt: LocalAttempt, tail: readonly unknown[]): void {
  const events = parseHostEvents(tail);
  if (typeof events === 'string') return;
  let deltas = 0;
  for (const e of events) {
    if (e[0] === 'q') return;
    if (e[0] !== 'd') continue;
    deltas += e[1].length;
    if (deltas > MAX_TAIL_DELTAS) return;
  }
  attempt.spec.host.events(events);
}

/**
 * The default transport: subagents on a warm pool of worker threads of this
 * process. Pass it as `createSupervisor({ transport: localTransport({ threads: 4 }) })`
 * (the same as `createSupervisor({ pool: { threads: 4 } })`). Its options are
 * checked here: a wrong one throws an `InvalidArgumentError` naming it.
 *
 * @example
 * ```ts
 * const supervisor = createSupervisor({ transport: localTransport({ threads: 2, graceMs: 500 }) })
 * await supervisor.ready()
 * ```
 */
export function localTransport(options: LocalTransportOptions = {}): LocalTransport {
  return new LocalTransport(resolveLocalTransportOptions(options, 'localTransport'));
}
