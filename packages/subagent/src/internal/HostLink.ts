import { MessageChannel, type MessagePort, parentPort } from 'node:worker_threads';
import { CancelledError, HOST_OPEN, type HostApi, type RunCancellation } from '@troupe/core';
import { type Remote, releaseProxy, wrap } from 'comlink';
import { portEndpoint } from '../portEndpoint.js';

/**
 * The worker end of one run's host channel, opened on first use: a run that
 * never calls the supervisor pays nothing. The port travels to the
 * supervisor through `parentPort` (piscina forwards it as a pool 'message').
 *
 * comlink has no failure detection, so every call is raced against the
 * run's cancellation: a cancelled run never hangs on a pending call.
 */
export class HostLink {
  readonly #runId: string;
  readonly #cancellation: RunCancellation;
  #port: MessagePort | undefined;
  #remote: Remote<HostApi> | undefined;
  #closed = false;

  constructor(runId: string, cancellation: RunCancellation) {
    this.#runId = runId;
    this.#cancellation = cancellation;
  }

  #api(): Remote<HostApi> {
    if (this.#closed) throw new CancelledError('shutdown', 'the run has ended: its host channel is closed');
    if (this.#remote === undefined) {
      if (parentPort === null) throw new Error('HostLink must run in a worker thread');
      const { port1, port2 } = new MessageChannel();
      parentPort.postMessage({ [HOST_OPEN]: this.#runId, port: port2 }, [port2]);
      this.#port = port1;
      this.#remote = wrap<HostApi>(portEndpoint(port1));
    }
    return this.#remote;
  }

  /** Call the supervisor; rejects with the run's `CancelledError` as soon as the run is cancelled. */
  call<T>(invoke: (api: Remote<HostApi>) => Promise<T>): Promise<T> {
    const token = this.#cancellation.token;
    if (token.isCancelled()) return Promise.reject(new CancelledError(token.reason ?? 'user'));
    let api: Remote<HostApi>;
    try {
      api = this.#api();
    } catch (error) {
      return Promise.reject(error);
    }
    const signal = token.signal;
    return new Promise<T>((resolve, reject) => {
      const onAbort = (): void => reject(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      invoke(api).then(
        (value) => {
          signal.removeEventListener('abort', onAbort);
          resolve(value);
        },
        (error: unknown) => {
          signal.removeEventListener('abort', onAbort);
          reject(error);
        },
      );
    });
  }

  /** Fire-and-forget (telemetry): never waits, never throws. */
  notify(invoke: (api: Remote<HostApi>) => unknown): void {
    if (this.#closed) return;
    try {
      void Promise.resolve(invoke(this.#api())).catch(() => {});
    } catch {
      // A closed link drops telemetry: the run is over.
    }
  }

  /** Close the port: the run has ended. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#remote !== undefined) this.#remote[releaseProxy]();
    this.#port?.close();
    this.#port = undefined;
    this.#remote = undefined;
  }
}
