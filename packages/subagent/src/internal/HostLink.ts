import { MessageChannel, parentPort, threadId } from 'node:worker_threads';
import {
  type CancelCell,
  CancelledError,
  HOST_OPEN,
  type HostApi,
  onCancelled,
  type RunCancellation,
} from '@troupe/core';
import { type Remote, wrap } from 'comlink';
import { portEndpoint } from '../portEndpoint.js';

// The worker's one host channel, opened on the first call any run makes and
// kept for the worker's life (see HostApi for why not one per run).
let channel:
  | {
      approve: Remote<HostApi>['approve'];
      runTask: Remote<HostApi>['runTask'];
      telemetry: Remote<HostApi>['telemetry'];
    }
  | undefined;

function open(): NonNullable<typeof channel> {
  if (channel !== undefined) return channel;
  if (parentPort === null) throw new Error('HostLink must run in a worker thread');
  const { port1, port2 } = new MessageChannel();
  // Piscina forwards a worker's parentPort messages as pool 'message' events.
  parentPort.postMessage({ [HOST_OPEN]: threadId, port: port2 }, [port2]);
  // A port with a listener keeps a thread alive; this one must not (piscina decides).
  port1.unref();
  const remote = wrap<HostApi>(portEndpoint(port1));
  // Bind the methods once: each property read of a comlink proxy makes a new proxy.
  channel = { approve: remote.approve, runTask: remote.runTask, telemetry: remote.telemetry };
  return channel;
}

/**
 * One run's view of its worker's host channel: every call names the run, and
 * is raced against the run's cancellation (comlink has no failure
 * detection: a cancelled run never hangs on a pending call). After the run
 * ends, calls are refused and telemetry is dropped.
 */
export class HostLink {
  readonly #agentId: string;
  readonly #cancellation: RunCancellation;
  #closed = false;

  constructor(agentId: string, cancellation: RunCancellation) {
    this.#agentId = agentId;
    this.#cancellation = cancellation;
  }

  /** Call the supervisor; rejects with the run's `CancelledError` as soon as the run is cancelled. */
  call<T>(invoke: (api: NonNullable<typeof channel>, agentId: string) => Promise<T>): Promise<T> {
    const token = this.#cancellation.token;
    if (this.#closed) return Promise.reject(new CancelledError('shutdown', 'the run has ended'));
    if (token.isCancelled()) return Promise.reject(new CancelledError(token.reason ?? 'user'));
    let api: NonNullable<typeof channel>;
    try {
      api = open();
    } catch (error) {
      return Promise.reject(error);
    }
    // Raced against the run token's one cancellation promise (no AbortSignal, no
    // listener to add and remove per call: those cost ~12 µs a call in a worker),
    // through a cell emptied when the call settles.
    const cell: CancelCell = { fn: undefined };
    onCancelled(token, cell);
    return new Promise<T>((resolve, reject) => {
      cell.fn = (reason) => reject(new CancelledError(reason));
      invoke(api, this.#agentId).then(
        (value) => {
          cell.fn = undefined;
          resolve(value);
        },
        (error: unknown) => {
          cell.fn = undefined;
          reject(error);
        },
      );
    });
  }

  /** Fire-and-forget (telemetry): never waits, never throws. */
  notify(invoke: (api: NonNullable<typeof channel>, agentId: string) => unknown): void {
    if (this.#closed) return;
    try {
      void Promise.resolve(invoke(open(), this.#agentId)).catch(() => {});
    } catch {
      // Telemetry is best-effort: a failure to send never fails the run.
    }
  }

  /** The run has ended: refuse further calls. Idempotent. */
  close(): void {
    this.#closed = true;
  }
}
