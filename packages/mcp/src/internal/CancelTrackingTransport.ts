import type { Transport, TransportSendOptions } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage, MessageExtraInfo } from '@modelcontextprotocol/sdk/types.js';

/**
 * A transport that passes everything to the SDK's own and keeps the sends of
 * `notifications/cancelled` under way, so that a cancelled call can wait for
 * its cancellation to be out before it settles.
 *
 * Why: the SDK sends the notification when the call's signal aborts and
 * rejects the call at once, without waiting for the send. Over HTTP the send
 * is a request of its own; in a worker whose run has just ended, the thread
 * is frozen between tasks and the request would wait for the next task. The
 * tool waits for it (the worker keeps the task open while a cancelled tool
 * settles), so the server hears of the cancel now.
 */
export class CancelTrackingTransport implements Transport {
  readonly #inner: Transport;
  readonly #cancellations = new Set<Promise<void>>();
  onclose?: (() => void) | undefined;
  onerror?: ((error: Error) => void) | undefined;
  onmessage?: (<T extends JSONRPCMessage>(message: T, extra?: MessageExtraInfo) => void) | undefined;

  constructor(inner: Transport) {
    this.#inner = inner;
    inner.onclose = () => this.onclose?.();
    inner.onerror = (error) => this.onerror?.(error);
    inner.onmessage = (message, extra) => this.onmessage?.(message, extra);
  }

  get sessionId(): string | undefined {
    return this.#inner.sessionId;
  }

  setProtocolVersion(version: string): void {
    this.#inner.setProtocolVersion?.(version);
  }

  start(): Promise<void> {
    return this.#inner.start();
  }

  send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    const sent = this.#inner.send(message, options);
    if ('method' in message && message.method === 'notifications/cancelled') {
      const settled = sent.then(
        () => {},
        () => {},
      );
      this.#cancellations.add(settled);
      void settled.then(() => this.#cancellations.delete(settled));
    }
    return sent;
  }

  close(): Promise<void> {
    return this.#inner.close();
  }

  /** Resolves when every cancellation sent so far is out (or failed), or after `ms`. */
  async flushCancellations(ms: number): Promise<void> {
    if (this.#cancellations.size === 0) return;
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      Promise.allSettled([...this.#cancellations]),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, ms);
      }),
    ]);
    clearTimeout(timer);
  }
}
