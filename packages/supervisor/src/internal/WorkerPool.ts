import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { MessagePort, type ResourceLimits, receiveMessageOnPort, SHARE_ENV, type Worker } from 'node:worker_threads';
import { decodeSubagentResult, HOST_OPEN, KeptScopes, WORKER_READY } from '@troupe/core/internal';
import { WORKER_URL } from '@troupe/subagent';
import { Piscina } from 'piscina';
import type { CancellationTable, Segment } from '../CancellationTable.js';
import { SLICE_MS } from './HostChannel.js';

/** How long closing waits for threads still booting before it terminates them anyway. */
const BOOT_WAIT_MS = 2_000;

/** One worker thread, as the supervisor knows it: from the `Worker` object, never from what the thread says. */
export interface ThreadInfo {
  readonly id: number;
  readonly worker: Worker;
  /** This thread's own cancellation buffer. */
  readonly segment: Segment;
  /** Whether the worker has the buffer: it answered a task that carried it (a thread keeps it). */
  bufferSent: boolean;
  /**
   * The lean scope versions the worker holds, as it keeps them (the mirror of its cache): each
   * one it answered a task that carried in full. A task of one of them goes without its scope.
   */
  readonly keptScopes: KeptScopes<true>;
  /**
   * The lean scope version the task on this thread now carried in full (0: none), counted in
   * {@link keptScopes} the moment the thread answers it — before piscina frees the thread and the
   * next task is bound to it (counted later, that task would be bound on a stale record).
   */
  sentScope: number;
  /** Its host channel, once it handed one over. */
  port: MessagePort | undefined;
  /** Serves one message of its host channel at once (see {@link WorkerPoolOptions.onHostPort}). */
  serveHost: ((raw: unknown) => void) | undefined;
  /** Why it is being recycled (terminated on purpose), if it is. */
  recycled: string | undefined;
  /** Set when the thread died: its exit code, or the error that killed it. */
  exitCode: number | undefined;
  error: Error | undefined;
  /** Resolves with the exit code once the thread has exited. */
  readonly exited: Promise<number>;
  /** Messages it sent in the current flood window, and when the window started. */
  floodCount: number;
  floodStart: number;
  /** Its last task result read on the way in, and the reading (see {@link readResultOf}). */
  lastRead: object | undefined;
  lastReading: ReturnType<typeof decodeSubagentResult> | undefined;
}

/**
 * What a task carries to the balancer: called once, synchronously, when
 * piscina hands the task to a thread, before the task is posted — the moment
 * the supervisor learns (from piscina, not from the worker) which thread
 * runs it.
 */
export interface DispatchTicket {
  onDispatch(thread: ThreadInfo): void;
}

/** What a task withdrawn before dispatch rejects with (see {@link WorkerPool.withdraw}). */
export const WITHDRAWN: unique symbol = Symbol('troupe.withdrawn');

interface Waiting {
  readonly task: unknown[];
  readonly ticket: DispatchTicket;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: unknown) => void;
  withdrawn: boolean;
}

/** Options of {@link WorkerPool}. */
export interface WorkerPoolOptions {
  readonly threads: number | undefined;
  readonly resourceLimits: ResourceLimits | undefined;
  /** Piscina's own queue bound (a backstop; the run tree checks its own first). */
  readonly maxQueue: number;
  readonly table: CancellationTable;
  /**
   * A thread handed over its host channel: serve it. Returns what serves one
   * of its messages at once (the pool reads what a thread that exited left
   * queued there, whether or not the channel is reading the port just then).
   */
  readonly onHostPort: (thread: ThreadInfo, port: MessagePort) => (raw: unknown) => void;
  /** A thread broke the protocol on its parentPort (the pool recycles it). */
  readonly onViolation: (thread: ThreadInfo, reason: string) => void;
  /** A thread is gone (exited, crashed, recycled). */
  readonly onThreadGone: (thread: ThreadInfo) => void;
}

/**
 * Piscina hands its balancer an "interface" per ready thread, made afresh by
 * a getter on every `run()` (and every time a thread frees up): an object
 * literal with six accessors, which V8 builds through its runtime, ~1.4 µs
 * per thread on Node 20 — on every dispatch, times the threads (a 12-thread
 * pool paid ~16 µs per task). Its accessors read the thread's live state, so
 * one object per thread serves as well: the first one piscina makes (the one
 * its `workerCreate` event carries) is kept as that thread's own `interface`
 * property. Only this pool's threads are touched; when piscina's shape is
 * not the one expected (another version), nothing is changed.
 */
function keepInterface(handle: object): void {
  const key = Object.getOwnPropertySymbols(handle).find((s) => s.description === 'Piscina.kWorkerData');
  if (key === undefined) return;
  const info = (handle as Record<symbol, unknown>)[key];
  if (typeof info !== 'object' || info === null) return;
  let proto: object | null = Object.getPrototypeOf(info);
  let getter: PropertyDescriptor | undefined;
  for (; proto !== null && getter === undefined; proto = Object.getPrototypeOf(proto)) {
    getter = Object.getOwnPropertyDescriptor(proto, 'interface');
  }
  if (getter?.get === undefined || Object.hasOwn(info, 'interface')) return;
  Object.defineProperty(info, 'interface', { value: handle, configurable: true });
}

/**
 * Transport only: a warm piscina pool running the subagent worker entry,
 * one task per thread at a time. It knows threads — which one each task was
 * dispatched to (piscina's balancer tells it), their host channels (bound
 * from the `Worker` a message came out of), how they died — and nothing of
 * what a task means.
 */
export class WorkerPool {
  readonly #piscina: Piscina;
  readonly #threads = new Map<number, ThreadInfo>();
  readonly #table: CancellationTable;
  readonly #options: WorkerPoolOptions;
  readonly #size: number;
  readonly #ready: Promise<void>;
  #markBooted: ((thread: number) => void) | undefined;
  /** Threads that sent their boot signal (every thread, replacements too), and who waits for them. */
  readonly #bootedIds = new Set<number>();
  #bootWaiters: (() => void)[] = [];
  #destroyed = false;
  /** The ticket of the task inside `piscina.run()` now (see #post). */
  #posting: DispatchTicket | undefined;
  /** Tasks posted to piscina and not settled: at most one per thread. */
  #inFlight = 0;
  /**
   * Tasks waiting for a thread, oldest first: the queue is this pool's, not
   * piscina's, so a task cancelled before it starts leaves at once
   * (`withdraw`) instead of being dispatched only to stop.
   */
  readonly #waiting: Waiting[] = [];
  #head = 0;
  #queued = 0;
  readonly #byTicket = new WeakMap<DispatchTicket, Waiting>();

  constructor(options: WorkerPoolOptions) {
    this.#options = options;
    this.#table = options.table;
    this.#size = options.threads ?? availableParallelism();
    let markReady: () => void = () => {};
    this.#ready = new Promise<void>((resolve) => {
      markReady = resolve;
    });
    const booted = new Set<number>();
    this.#markBooted = (thread: number) => {
      booted.add(thread);
      if (booted.size >= this.#size) {
        markReady();
        this.#markBooted = undefined;
      }
    };
    const kQueueOptions = Piscina.queueOptionsSymbol;
    this.#piscina = new Piscina({
      filename: fileURLToPath(WORKER_URL),
      minThreads: this.#size,
      maxThreads: this.#size,
      idleTimeout: Number.POSITIVE_INFINITY,
      maxQueue: options.maxQueue,
      // Piscina's run/wait histograms cost a record per task and nothing here reads them.
      recordTiming: false,
      // One process.env for every thread, read live: a variable the host sets after start-up (a
      // port, a key) reaches a model factory that runs in a worker (a copy, Node's default, would
      // hold what the environment was when the thread started). Threads shared the environment
      // anyway (a tool can read it): this only stops the copies from going stale.
      env: SHARE_ENV,
      ...(options.resourceLimits === undefined ? {} : { resourceLimits: options.resourceLimits }),
      // Piscina's least-busy choice (one task per thread), and the one place the
      // supervisor learns which thread a task goes to. Must not throw.
      loadBalancer: (task, workers) => {
        for (const w of workers) {
          if (w.currentUsage !== 0 || w.terminating || w.destroyed) continue;
          const thread = this.#threads.get(w.id);
          if (thread === undefined || thread.recycled !== undefined || thread.exitCode !== undefined) continue;
          // A task piscina queued carries its ticket; the one being posted now has it in a field (see #post).
          let ticket = (task as unknown as Record<symbol, unknown>)[kQueueOptions] as DispatchTicket | null;
          if (ticket === null) {
            ticket = this.#posting ?? null;
            this.#posting = undefined;
          }
          try {
            ticket?.onDispatch(thread);
          } catch {
            // The ticket records its own failure in the task it fills (the worker refuses it).
          }
          return w;
        }
        return null;
      },
    });
    // Without an 'error' listener an error in an idle worker would crash the process.
    this.#piscina.on('error', () => {});
    this.#piscina.on('workerCreate', (w: { id: number }) => this.#hook(w.id, w));
  }

  // Learn a new thread from piscina: its Worker object is its identity from now on.
  #hook(id: number, handle: object): void {
    if (this.#threads.has(id)) return;
    keepInterface(handle);
    const worker = this.#piscina.threads.find((t) => t.threadId === id);
    if (worker === undefined) return;
    let exited: (code: number) => void = () => {};
    const thread: ThreadInfo = {
      id,
      worker,
      exited: new Promise<number>((resolve) => {
        exited = resolve;
      }),
      segment: this.#table.segment(id),
      bufferSent: false,
      keptScopes: new KeptScopes(),
      sentScope: 0,
      port: undefined,
      serveHost: undefined,
      recycled: undefined,
      exitCode: undefined,
      error: undefined,
      floodCount: 0,
      floodStart: 0,
      lastRead: undefined,
      lastReading: undefined,
    };
    this.#threads.set(id, thread);
    guardTaskPort(handle, thread, (reason) => this.#options.onViolation(thread, reason));
    worker.on('message', (message: unknown) => this.#onThreadMessage(thread, message));
    // One this thread cannot deserialize (deeper than its stack: a worker's is larger) is refused, not lost.
    worker.on('messageerror', (error: Error) => {
      if (thread.recycled === undefined) {
        this.#options.onViolation(thread, `a parentPort message that cannot be read here (${error.message})`);
      }
    });
    worker.on('error', (error: unknown) => {
      thread.error ??= error instanceof Error ? error : new Error(String(error));
    });
    worker.once('exit', (code: number) => {
      thread.exitCode = code;
      // What the thread posted on its host channel before it died is queued there still: read it
      // now, before its runs end crashed and the port closes (a crashed run's last telemetry — the
      // model call whose tokens it spent — comes before its outcome; closing dropped it).
      drainHostPort(thread);
      exited(code);
      this.#threads.delete(id);
      this.#bootedIds.delete(id);
      this.#bootChanged();
      thread.port?.close();
      thread.port = undefined;
      this.#table.dropSegment(id);
      this.#options.onThreadGone(thread);
    });
  }

  // A message on a thread's parentPort: the boot signal, its host channel, piscina's own; nothing else.
  #onThreadMessage(thread: ThreadInfo, message: unknown): void {
    // A thread being recycled broke the protocol already: nothing it sends counts.
    if (thread.recycled !== undefined) return;
    if (typeof message !== 'object' || message === null) {
      this.#options.onViolation(thread, 'a parentPort message that is not an object');
      return;
    }
    const m = message as Record<string, unknown>;
    if (m._WORKER_READY === true) return; // piscina's
    if (m[WORKER_READY] === true) {
      this.#markBooted?.(thread.id);
      this.#bootedIds.add(thread.id);
      this.#bootChanged();
      return;
    }
    if (m[HOST_OPEN] === true) {
      const port = m.port;
      if (thread.port !== undefined) {
        this.#options.onViolation(thread, 'a second host channel');
        return;
      }
      if (!isMessagePort(port)) {
        this.#options.onViolation(thread, 'a host channel that is not a MessagePort');
        return;
      }
      thread.port = port;
      thread.serveHost = this.#options.onHostPort(thread, port);
      return;
    }
    this.#options.onViolation(thread, 'an unknown parentPort message');
  }

  /** Resolves once every thread has booted and loaded the subagent runtime. */
  ready(): Promise<void> {
    return this.#ready;
  }

  /** Threads alive now. */
  get threads(): number {
    return this.#piscina.threads.length;
  }

  /** The configured number of threads. */
  get size(): number {
    return this.#size;
  }

  /** Tasks waiting for a thread. */
  get queued(): number {
    return this.#queued;
  }

  /** Host channels open. */
  get openPorts(): number {
    let n = 0;
    for (const t of this.#threads.values()) if (t.port !== undefined) n++;
    return n;
  }

  /**
   * Post a task; `ticket` learns its thread at dispatch. Resolves with the
   * worker's raw result; rejects when it could not be posted (not cloneable)
   * or its thread died.
   */
  run(task: unknown[], ticket: DispatchTicket): Promise<unknown> {
    if (this.#inFlight < this.#size) return this.#post(task, ticket);
    return new Promise((resolve, reject) => {
      const waiting: Waiting = { task, ticket, resolve, reject, withdrawn: false };
      this.#waiting.push(waiting);
      this.#byTicket.set(ticket, waiting);
      this.#queued++;
    });
  }

  /**
   * Take a task that waits for a thread out of the queue: its `run` rejects
   * with {@link WITHDRAWN} at once. False when it was dispatched already.
   */
  withdraw(ticket: DispatchTicket): boolean {
    const waiting = this.#byTicket.get(ticket);
    if (waiting === undefined || waiting.withdrawn) return false;
    waiting.withdrawn = true;
    this.#byTicket.delete(ticket);
    this.#queued--;
    waiting.reject(WITHDRAWN);
    return true;
  }

  #post(task: unknown[], ticket: DispatchTicket): Promise<unknown> {
    this.#inFlight++;
    // Piscina calls the balancer inside run() when a thread is free (the norm:
    // this pool posts only then), so the ticket waits in a field for it. When
    // piscina queues the task instead (a thread is being replaced), it rides on
    // the task, where the balancer finds it later: a symbol-keyed property on
    // the array costs a map transition and a property store on every run.
    this.#posting = ticket;
    const running = this.#piscina.run(task);
    if (this.#posting !== undefined) {
      this.#posting = undefined;
      (task as unknown as Record<symbol, unknown>)[Piscina.queueOptionsSymbol] = ticket;
    }
    running.then(this.#settled, this.#settled);
    return running;
  }

  readonly #settled = (): void => {
    this.#inFlight--;
    const waiting = this.#waiting;
    while (this.#head < waiting.length && this.#inFlight < this.#size) {
      const next = waiting[this.#head] as Waiting;
      waiting[this.#head++] = undefined as unknown as Waiting;
      if (next.withdrawn) continue;
      this.#byTicket.delete(next.ticket);
      this.#queued--;
      this.#post(next.task, next.ticket).then(next.resolve, next.reject);
    }
    if (this.#head > 1024 && this.#head * 2 > waiting.length) {
      waiting.splice(0, this.#head);
      this.#head = 0;
    }
  };

  /**
   * Terminate `thread` (piscina rejects its task and starts a replacement).
   * The first reason is kept. Idempotent.
   */
  recycle(thread: ThreadInfo, reason: string): void {
    if (thread.recycled !== undefined || thread.exitCode !== undefined) return;
    thread.recycled = reason;
    thread.port?.close();
    void thread.worker.terminate();
  }

  /** Whether the pool was destroyed under its runs. */
  get destroyed(): boolean {
    return this.#destroyed;
  }

  /**
   * Stop every thread, once the supervisor has ended its runs. Not piscina's close(): it races
   * the flush against a 30 s timer it never clears, which holds the pool, and through it the
   * whole supervisor, for 30 s after close() resolves.
   */
  async close(): Promise<void> {
    await this.#whenBooted();
    await this.#piscina.destroy();
    this.#closePorts();
  }

  /** Terminate every thread at once; queued and running tasks reject. */
  async destroy(): Promise<void> {
    this.#destroyed = true;
    for (let i = this.#head; i < this.#waiting.length; i++) {
      const w = this.#waiting[i];
      if (w !== undefined && !w.withdrawn) this.withdraw(w.ticket);
    }
    await this.#whenBooted();
    await this.#piscina.destroy();
    this.#closePorts();
  }

  /**
   * Every live thread has booted (or BOOT_WAIT_MS passed): a thread terminated while it still
   * imports its modules leaves the files it was reading open for good (a file descriptor per
   * module, about a hundred per thread).
   */
  #whenBooted(): Promise<void> {
    if (this.#allBooted()) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, BOOT_WAIT_MS);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.#bootWaiters.push(done);
    });
  }

  #allBooted(): boolean {
    for (const id of this.#threads.keys()) if (!this.#bootedIds.has(id)) return false;
    return true;
  }

  #bootChanged(): void {
    if (this.#bootWaiters.length === 0 || !this.#allBooted()) return;
    const waiters = this.#bootWaiters;
    this.#bootWaiters = [];
    for (const w of waiters) w();
  }

  #closePorts(): void {
    for (const t of this.#threads.values()) {
      t.port?.close();
      t.port = undefined;
    }
  }
}

/** The part of piscina's per-thread record (`WorkerInfo`) that {@link guardTaskPort} wraps. */
interface PiscinaWorkerInfo {
  onMessage: (message: unknown) => void;
  processPendingMessages: () => void;
  readonly taskInfos: ReadonlyMap<unknown, unknown>;
  readonly port: MessagePort;
}

/**
 * Put a check in front of piscina's handler of a thread's task port. A
 * worker's code can post anything on that port (it can capture the port by
 * patching `MessagePort.prototype.postMessage`), and piscina 5.3.2 takes
 * every message there for a task response: it destructures `null` (a
 * TypeError thrown on this thread: the process dies) and frees the thread
 * for a response to a task it never ran. Only an object answering a task
 * piscina is waiting for on that thread gets through; anything else is
 * dropped and reported with `violation` (the thread is recycled). Once the
 * thread is being recycled nothing of it gets through, its task's result
 * included: the task rejects when the thread exits, so a run whose worker
 * broke the protocol never ends on what that worker said after.
 *
 * A message that cannot be deserialized here is a violation too, whether
 * the port's event reports it (`messageerror`: piscina would never hear of
 * it, and its task would wait for ever) or piscina's synchronous drain
 * throws on it (an exception on this thread, in the middle of another
 * thread's result).
 *
 * Both of piscina's delivery paths (the port's `message` event and its
 * synchronous drain with `receiveMessageOnPort`) call the record's
 * `onMessage`, so wrapping that one property guards them both. The record is
 * reached through piscina's own symbol on the handle it passes to
 * `workerCreate` (piscina is pinned; a version without it fails loudly here).
 */
function guardTaskPort(handle: object, thread: ThreadInfo, violation: (reason: string) => void): void {
  const symbol = Object.getOwnPropertySymbols(handle).find((s) => s.description === 'Piscina.kWorkerData');
  const info = symbol === undefined ? undefined : ((handle as Record<symbol, unknown>)[symbol] as PiscinaWorkerInfo);
  if (
    info === undefined ||
    typeof info.onMessage !== 'function' ||
    typeof info.processPendingMessages !== 'function' ||
    !(info.taskInfos instanceof Map) ||
    !(info.port instanceof MessagePort)
  ) {
    throw new Error(
      'piscina changed: its WorkerInfo has no onMessage/processPendingMessages/taskInfos/port to guard the task port with',
    );
  }
  // A response this thread cannot deserialize (deeper than its stack: a worker's is
  // larger) never reaches piscina: its task would wait for ever. Refused instead: the
  // thread is recycled and the task rejects when it exits.
  // What reached the task port behind a result that waits for the host channel's backlog: handled
  // after that result, in the order it came (a message it cannot read, posted after the result,
  // must not recycle the thread before the result is in).
  let behind: (() => void)[] | undefined;
  const later = (handle: () => void): boolean => {
    if (behind === undefined) return false;
    behind.push(handle);
    return true;
  };
  const unreadable = (error: unknown): void => {
    if (later(() => unreadable(error))) return;
    if (thread.recycled === undefined && thread.exitCode === undefined) {
      violation(
        `a task-port message that cannot be read here (${error instanceof Error ? error.message : String(error)})`,
      );
    }
  };
  info.port.on('messageerror', unreadable);
  // piscina also drains every thread's task port with receiveMessageOnPort after each
  // result (of any thread), which throws for such a message — inside the handler of
  // another thread's result, on this thread: the process would die. Caught here, and
  // the thread whose port it was is the one refused.
  const drain = info.processPendingMessages.bind(info);
  info.processPendingMessages = (): void => {
    try {
      drain();
    } catch (error) {
      unreadable(error);
    }
  };
  const deliver = info.onMessage;
  info.onMessage = (message: unknown): void => {
    if (!later(() => onResult(message))) onResult(message);
  };
  const onResult = (message: unknown): void => {
    if (thread.recycled !== undefined || thread.exitCode !== undefined) return;
    if (typeof message !== 'object' || message === null) {
      violation('a task-port message that is not an object');
      return;
    }
    const taskId: unknown = (message as { taskId?: unknown }).taskId;
    if (!info.taskInfos.has(taskId)) {
      violation('a task-port message for no task of this thread');
      return;
    }
    // What the thread posted on its host channel before this result is handled first: a message
    // refused there recycles the thread now, while it runs nothing else, and its result is dropped
    // (the task rejects when it exits). Handled after, it would recycle a thread that piscina had
    // given its next run (an honest one, lost with the realm) — the result overtakes the host
    // channel's messages across ports as often as not.
    let drained = true;
    try {
      drained = drainHostPort(thread, SLICE_MS);
    } catch (error) {
      // A host's event listener threw: its error, thrown as it would have been, once this result is in.
      queueMicrotask(() => {
        throw error;
      });
    }
    if (thread.recycled !== undefined) return;
    if (!drained) {
      // More queued there than a slice of this thread's loop serves (a worker that posted faster
      // than it is read): the result waits — piscina keeps the thread busy meanwhile — and the
      // rest is read a slice per turn of the loop, as the channel reads it; then the result again.
      behind = [];
      setImmediate(() => {
        const after = behind ?? [];
        behind = undefined;
        onResult(message);
        // Waiting again (the backlog is still there): what came after it still waits behind it.
        if (behind !== undefined) (behind as (() => void)[]).push(...after);
        else for (const next of after) next();
      });
      return;
    }
    // The worker answered the task that carried a lean scope version in full: it keeps it now (it
    // takes a task's scope first), and so does the record of it, before the next task is bound.
    if (thread.sentScope !== 0) {
      thread.keptScopes.add(thread.sentScope, true);
      thread.sentScope = 0;
    }
    // A run's result is read here, before piscina hands this thread its next task: a thread that
    // answers with something that is not a result is recycled first, so no other run starts in the
    // realm that sent it (read later, the next run was on the thread already and died with it).
    const result: unknown = (message as { result?: unknown }).result;
    if (typeof result === 'object' && result !== null && (message as { error?: unknown }).error == null) {
      let read: ReturnType<typeof decodeSubagentResult>;
      try {
        read = decodeSubagentResult(result);
      } catch (error) {
        read = { error: `it cannot be read: ${error instanceof Error ? error.message : String(error)}` };
      }
      thread.lastRead = result;
      thread.lastReading = read;
      if (read.error !== undefined) violation(`it returned a malformed result (${read.error})`);
    }
    deliver(message);
  };
}

/**
 * Hand whatever `thread` posted on its host channel and is not yet read to
 * the channel's handler now, in order. A worker posts on its two ports in
 * its own order, and a message is queued on the receiving port as it is
 * posted, so everything posted before a result is queued by the time the
 * result is read (or the thread's exit is seen). A message that cannot be
 * read here goes to the port's `messageerror` handler, as it would have.
 * With `sliceMs`, it stops once it has taken that long: false when messages
 * may be left.
 */
function drainHostPort(thread: ThreadInfo, sliceMs = Number.POSITIVE_INFINITY): boolean {
  const port = thread.port;
  const start = performance.now();
  while (port !== undefined && thread.recycled === undefined && thread.port === port) {
    // (A slice measures how long this thread has been busy: not a time anyone injects.)
    if (performance.now() - start > sliceMs) return false;
    let m: { message: unknown } | undefined;
    try {
      m = receiveMessageOnPort(port);
    } catch (error) {
      port.emit('messageerror', error instanceof Error ? error : new Error(String(error)));
      return true;
    }
    if (m === undefined) return true;
    thread.serveHost?.(m.message);
  }
  return true;
}

/**
 * The reading of `raw` made on its way in (see guardTaskPort), if it is the last result read from
 * `thread`: the dispatcher takes it instead of decoding the result again (on a miss it decodes).
 * One slot per thread, not a WeakMap by result: a weak entry for every run's fresh result costs
 * the collector a barrier on each write. A thread runs one task at a time, so its last result is
 * the one its dispatcher reads next, but for a result piscina drained in the same turn (decoded again).
 */
export function readResultOf(
  thread: ThreadInfo | undefined,
  raw: unknown,
): ReturnType<typeof decodeSubagentResult> | undefined {
  if (thread === undefined || thread.lastRead === undefined || thread.lastRead !== raw) return undefined;
  const read = thread.lastReading;
  thread.lastRead = undefined;
  thread.lastReading = undefined;
  return read;
}

// A transferred port arrives as a MessagePort of this realm; anything else merely shaped like one is refused.
function isMessagePort(v: unknown): v is MessagePort {
  return v instanceof MessagePort;
}
