import { TroupeError } from '@troupe/core';
import { encodeError, MAX_HOST_EVENTS } from '@troupe/core/internal';
import type { AttemptEnd, HostOperations } from '@troupe/supervisor';
import { decodeEnd } from './EndWire.js';
import type { RelayKind } from './Wire.js';

/** The most relayed messages of one attempt held back while an earlier one is missing. */
const MAX_HELD = 1024;

/** An attempt's relayed messages, as the owner serves them: in order, each once. */
export interface RelayedAttempt {
  readonly jobId: string;
  readonly capability: string;
  readonly host: HostOperations;
  /** The worker host it was granted to. */
  readonly hostId: string;
  /** The next message to serve. */
  nextSeq: number;
  /** Messages that came before an earlier one (pub/sub retries may reorder). */
  readonly held: Map<number, readonly [kind: RelayKind, payload: unknown]>;
  /** Replies served, by message: a message sent again gets the same reply, nothing runs twice. */
  readonly replies: Map<number, readonly [ok: 0 | 1, value: unknown]>;
}

/** What serving a message produced. */
export type Served =
  | { readonly kind: 'placed'; readonly threadId: number }
  | { readonly kind: 'end'; readonly end: AttemptEnd }
  | { readonly kind: 'handback'; readonly reason: string }
  /** The message breaks the protocol: refuse it and fence the attempt. */
  | { readonly kind: 'violation'; readonly reason: string };

/** Create the relay state of an attempt granted to `hostId`. */
export function relayedAttempt(
  jobId: string,
  capability: string,
  host: HostOperations,
  hostId: string,
): RelayedAttempt {
  return {
    jobId,
    capability,
    host,
    hostId,
    nextSeq: 1,
    held: new Map(),
    replies: new Map(),
  };
}

/** Which messages of `a` to serve now, in order, given `rseq` arrived: a duplicate is `'duplicate'`. */
export function admit(
  a: RelayedAttempt,
  rseq: number,
  kind: RelayKind,
  payload: unknown,
): 'duplicate' | 'overflow' | (readonly [number, RelayKind, unknown])[] {
  if (rseq < a.nextSeq || a.held.has(rseq)) return 'duplicate';
  if (rseq > a.nextSeq) {
    if (a.held.size >= MAX_HELD) return 'overflow';
    a.held.set(rseq, [kind, payload]);
    return [];
  }
  const ready: (readonly [number, RelayKind, unknown])[] = [[rseq, kind, payload]];
  a.nextSeq++;
  for (let next = a.held.get(a.nextSeq); next !== undefined; next = a.held.get(a.nextSeq)) {
    a.held.delete(a.nextSeq);
    ready.push([a.nextSeq, next[0], next[1]]);
    a.nextSeq++;
  }
  return ready;
}

/** How much one message weighs against its host's flood limit (a batch counts its events and deltas). */
export function weight(kind: RelayKind, payload: unknown): number {
  if (kind !== 'events' || !Array.isArray(payload)) return 1;
  let n = Math.max(1, Math.min(payload.length, MAX_HOST_EVENTS + 1));
  for (const e of payload) if (Array.isArray(e) && e[0] === 'd' && Array.isArray(e[1])) n += e[1].length;
  return n;
}

/**
 * Serve one relayed message of `a` that is the relay's own (its placement, its end, a hand-back).
 * The host calls (approval, nested task, events, checkpoint) are served by the supervisor's host
 * channel instead, as a thread's calls are.
 */
export function serve(_a: RelayedAttempt, kind: 'placed' | 'end' | 'handback', payload: unknown): Served {
  switch (kind) {
    case 'placed': {
      const threadId = Array.isArray(payload) ? payload[0] : undefined;
      if (typeof threadId !== 'number' || !Number.isSafeInteger(threadId) || threadId < 0) {
        return { kind: 'violation', reason: 'a malformed placement' };
      }
      return { kind: 'placed', threadId };
    }
    case 'end': {
      const end = decodeEnd(payload);
      if (typeof end === 'string') return { kind: 'violation', reason: `a malformed end: ${end}` };
      return { kind: 'end', end };
    }
    case 'handback': {
      const reason = Array.isArray(payload) ? payload[0] : undefined;
      return { kind: 'handback', reason: typeof reason === 'string' ? reason.slice(0, 200) : 'handed back' };
    }
    default:
      kind satisfies never;
      return { kind: 'violation', reason: 'an unknown message' };
  }
}

/** The error shape of a refusal, as an acknowledgement carries it. */
export function refusal(reason: string): unknown {
  return encodeError(new TroupeError(`the API host refused the relayed call: ${reason}`, { code: 'ERR_HOST_REFUSED' }));
}
