import { TroupeError } from '@troupe/core';
import { decodeError, ErrorShape } from '@troupe/core/internal';
import { encodeWire, type RelayKind } from './Wire.js';

interface Unacked {
  readonly bytes: Buffer;
  sentAt: number;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * A worker host's end of one attempt's relay to its owner: every message gets
 * the next sequence number and is sent again (the same bytes) until the owner
 * acknowledges it, so a message pub/sub dropped (a reconnect) arrives, and a
 * retry never acts twice (the owner serves each sequence number once and
 * answers a repeat with the same reply).
 */
export class RelayClient {
  readonly #jobId: string;
  readonly #capability: string;
  readonly #publish: (bytes: Buffer) => void;
  readonly #maxBytes: number;
  readonly #unacked = new Map<number, Unacked>();
  #seq = 0;
  #failed: Error | undefined;

  constructor(jobId: string, capability: string, maxBytes: number, publish: (bytes: Buffer) => void) {
    this.#jobId = jobId;
    this.#capability = capability;
    this.#maxBytes = maxBytes;
    this.#publish = publish;
  }

  /** Messages not acknowledged yet. */
  get pending(): number {
    return this.#unacked.size;
  }

  /** Send one message; resolves with the owner's reply, rejects with its refusal (rebuilt). */
  call(kind: RelayKind, payload: unknown, now: number): Promise<unknown> {
    if (this.#failed !== undefined) return Promise.reject(this.#failed);
    const rseq = ++this.#seq;
    let bytes: Buffer;
    try {
      bytes = encodeWire(['relay', this.#jobId, this.#capability, rseq, kind, payload]);
    } catch (error) {
      this.#seq--;
      return Promise.reject(
        new TroupeError(`a ${kind} call cannot cross to the API host: ${(error as Error).message}`, {
          code: 'ERR_NOT_CLONEABLE',
          cause: error,
        }),
      );
    }
    if (bytes.length > this.#maxBytes) {
      this.#seq--;
      return Promise.reject(
        new TroupeError(
          `a ${kind} message of ${bytes.length} bytes is over maxRelayBytes (${this.#maxBytes}): raise it on every host`,
          { code: 'ERR_INVALID_ARGUMENT' },
        ),
      );
    }
    return new Promise((resolve, reject) => {
      this.#unacked.set(rseq, { bytes, sentAt: now, resolve, reject });
      this.#publish(bytes);
    });
  }

  /** Send a message nobody waits on (events, a placement); a refusal is dropped. */
  notice(kind: RelayKind, payload: unknown, now: number): void {
    this.call(kind, payload, now).catch(() => {});
  }

  /** The owner acknowledged `rseq`. */
  acked(rseq: number, ok: 0 | 1, value: unknown): void {
    const u = this.#unacked.get(rseq);
    if (u === undefined) return;
    this.#unacked.delete(rseq);
    if (ok === 1) {
      u.resolve(value);
      return;
    }
    const shape = ErrorShape.safeParse(value);
    u.reject(
      shape.success
        ? decodeError(shape.data)
        : new TroupeError('the API host refused the relayed call', { code: 'ERR_HOST_REFUSED' }),
    );
  }

  /** Send again what waited longer than `olderThan` ms (all of it with 0: after a reconnect). */
  resend(now: number, olderThan: number): void {
    for (const u of this.#unacked.values()) {
      if (now - u.sentAt < olderThan) continue;
      u.sentAt = now;
      this.#publish(u.bytes);
    }
  }

  /** Nobody will acknowledge anything any more (the owner is gone, the attempt lost): reject everything. */
  fail(error: Error): void {
    this.#failed ??= error;
    for (const u of this.#unacked.values()) u.reject(error);
    this.#unacked.clear();
  }
}
