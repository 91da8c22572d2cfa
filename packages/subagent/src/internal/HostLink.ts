import { MessageChannel, type MessagePort, parentPort } from 'node:worker_threads';
import { CancelledError, type ModelDelta, type RunCancellation } from '@troupe/core';
import {
  type CancelCell,
  decodeError,
  HOST_OPEN,
  type HostEvent,
  HostOp,
  MAX_HOST_EVENTS,
  onCancelled,
  parseHostReply,
} from '@troupe/core/internal';

// The worker's one host channel, opened on the first call any run makes and
// kept for the worker's life: a MessageChannel per run leaves native memory
// behind until the worker's next major GC (measured: RSS +370 MB over
// 120,000 runs). Replies are matched to calls by a sequence number.
let port: MessagePort | undefined;
let nextSeq = 1;
/**
 * The most model deltas one message carries. A stream that arrives faster
 * than this thread parses it (a whole answer in one socket read) is parsed in
 * one macrotask: without a cap the host would get all of it in one message
 * at the end — nothing to show meanwhile, and a last hop that copies every
 * delta (measured, 1,000 deltas: ~0.8 ms from the last delta parsed to the
 * host). Sent 64 at a time, the host reads them while the rest is parsed and
 * the last hop carries at most 64 (~0.2 ms); 16 messages instead of 1 cost
 * the sender ~16 µs per 1,000 deltas. A slower stream still goes out once
 * per macrotask, so no delta waits for more to come (`pnpm bench models`,
 * BENCHMARKS.md). At most MAX_HOST_EVENTS, the most one `d` event may hold.
 */
const DELTAS_PER_MESSAGE = 64;
const waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();

function open(): MessagePort {
  if (port !== undefined) return port;
  if (parentPort === null) throw new Error('HostLink must run in a worker thread');
  const { port1, port2 } = new MessageChannel();
  // The supervisor binds the port to the thread this message comes out of.
  parentPort.postMessage({ [HOST_OPEN]: true, port: port2 }, [port2]);
  port1.on('message', onReply);
  // A port with a listener keeps a thread alive; this one must not (piscina decides).
  port1.unref();
  port = port1;
  return port1;
}

function onReply(raw: unknown): void {
  const reply = parseHostReply(raw);
  if (reply === undefined) return;
  const w = waiting.get(reply.seq);
  if (w === undefined) return;
  waiting.delete(reply.seq);
  if (reply.ok) w.resolve(reply.value);
  else w.reject(decodeError(reply.value as never));
}

/**
 * One run's view of its worker's host channel: every call presents the
 * run's capability and is raced against the run's cancellation (a cancelled
 * run never hangs on a pending call). Events are batched — one message per
 * macrotask, per {@link MAX_HOST_EVENTS} events or per 64 model deltas, a
 * question at once — and
 * counted, so the supervisor can hold the run's result until it has read
 * them all. After the run ends, calls are refused and events dropped.
 */
export class HostLink {
  readonly #capability: string;
  readonly #cancellation: RunCancellation;
  #closed = false;
  #buffer: HostEvent[] = [];
  #deltas: ModelDelta[] | undefined;
  #scheduled: ReturnType<typeof setImmediate> | undefined;
  #sent = 0;
  /** Deltas queued since the last flush. */
  #pendingDeltas = 0;

  constructor(capability: string, cancellation: RunCancellation) {
    this.#capability = capability;
    this.#cancellation = cancellation;
  }

  /** Event batches posted so far (what the result reports as `sent`). */
  get sent(): number {
    return this.#sent;
  }

  /** Call a named operation; rejects with the run's `CancelledError` as soon as the run is cancelled. */
  call(op: typeof HostOp.approve | typeof HostOp.task | typeof HostOp.checkpoint, payload: unknown): Promise<unknown> {
    const token = this.#cancellation.token;
    if (this.#closed) return Promise.reject(new CancelledError('shutdown', 'the run has ended'));
    if (token.isCancelled()) return Promise.reject(new CancelledError(token.reason ?? 'user'));
    let p: MessagePort;
    try {
      p = open();
    } catch (error) {
      return Promise.reject(error);
    }
    // Events first: whatever the run reported before this call reaches the supervisor before it.
    this.flush();
    const seq = nextSeq++;
    // Raced against the run token's one cancellation promise (no AbortSignal, no
    // listener to add and remove per call), through a cell emptied when the call settles.
    const cell: CancelCell = { fn: undefined };
    const promise = new Promise<unknown>((resolve, reject) => {
      waiting.set(seq, {
        resolve: (v) => {
          cell.fn = undefined;
          resolve(v);
        },
        reject: (e) => {
          cell.fn = undefined;
          reject(e);
        },
      });
      cell.fn = (reason) => {
        waiting.delete(seq);
        reject(new CancelledError(reason));
      };
    });
    onCancelled(token, cell);
    p.postMessage([op, seq, this.#capability, payload]);
    return promise;
  }

  /**
   * Queue an event of the run (sent with the next batch). A question, and
   * the start of a tool call, go at once with what is queued: user code is
   * about to run, and it may hold the thread (a CPU-bound tool never lets a
   * scheduled flush happen). A model call's start waits for the batch: a
   * model awaits its server (the scheduled flush runs then), and a run whose
   * model answers at once sends its events with its result.
   */
  event(event: HostEvent): void {
    if (this.#closed) return;
    this.#endDeltas();
    this.#buffer.push(event);
    if (
      event[0] === 'q' ||
      (event[0] === 't' && event[1] === 'tool.execute.start') ||
      this.#buffer.length >= MAX_HOST_EVENTS
    ) {
      this.flush();
    } else this.#schedule();
  }

  /** Queue a model delta (consecutive deltas travel as one event). */
  delta(delta: ModelDelta): void {
    if (this.#closed) return;
    let deltas = this.#deltas;
    if (deltas === undefined) {
      deltas = [];
      this.#deltas = deltas;
      this.#buffer.push(['d', deltas]);
    }
    deltas.push(delta);
    if (++this.#pendingDeltas >= DELTAS_PER_MESSAGE || this.#buffer.length >= MAX_HOST_EVENTS) this.flush();
    else this.#schedule();
  }

  #endDeltas(): void {
    this.#deltas = undefined;
  }

  #schedule(): void {
    if (this.#scheduled !== undefined) return;
    this.#scheduled = setImmediate(() => {
      this.#scheduled = undefined;
      this.flush();
    });
  }

  /** Take what is queued without posting it (it goes with the run's result: see `SubagentResult.tail`). */
  take(): unknown[] | undefined {
    if (this.#scheduled !== undefined) {
      clearImmediate(this.#scheduled);
      this.#scheduled = undefined;
    }
    this.#endDeltas();
    this.#pendingDeltas = 0;
    if (this.#buffer.length === 0) return undefined;
    const batch = this.#buffer;
    this.#buffer = [];
    return batch;
  }

  /** Post `batch` (events taken by `take`) as one batch. */
  post(batch: readonly unknown[]): void {
    this.#buffer.push(...(batch as HostEvent[]));
    this.flush();
  }

  /** Post what is queued now, as one batch. */
  flush(): void {
    if (this.#scheduled !== undefined) {
      clearImmediate(this.#scheduled);
      this.#scheduled = undefined;
    }
    this.#endDeltas();
    this.#pendingDeltas = 0;
    if (this.#buffer.length === 0) return;
    const batch = this.#buffer;
    this.#buffer = [];
    try {
      open().postMessage([HostOp.events, 0, this.#capability, batch]);
      this.#sent++;
    } catch {
      // Telemetry is best-effort: a batch that cannot be posted never fails the run.
    }
  }

  /**
   * The run is over but left work running in this thread: hand the
   * supervisor its result now (it recycles the worker if the work does not
   * settle within its grace period).
   */
  holding(result: unknown): void {
    this.flush();
    try {
      open().postMessage([HostOp.holding, 0, this.#capability, result]);
      this.#sent++;
    } catch {
      // The supervisor then learns the run's end from the task itself.
    }
  }

  /** The run has ended: post what is queued, refuse further calls. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.flush();
    this.#closed = true;
  }
}
