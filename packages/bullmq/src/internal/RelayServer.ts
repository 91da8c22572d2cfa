import { TroupeError } from '@troupe/core';
import {
  encodeError,
  HostApprovalRequest,
  HostOp,
  MAX_HOST_EVENTS,
  parseHostCall,
  parseHostCheckpoint,
  parseHostEvents,
  parseHostTaskRequest,
} from '@troupe/core/internal';
import type { AttemptEnd, HostOperations } from '@troupe/supervisor';
import { decodeEnd } from './EndWire.js';
import type { RelayKind } from './Wire.js';

/** The most relayed messages of one attempt held back while an earlier one is missing. */
const MAX_HELD = 1024;

/** The most questions one attempt may ask (as the local host channel's `MAX_QUESTIONS_PER_DISPATCH`). */
const MAX_QUESTIONS = 1024;

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
  /** Calls a person or the handler was asked about, and calls a question was asked for. */
  readonly approvals: Set<string>;
  readonly questions: Set<string>;
}

/** What serving a message produced. */
export type Served =
  /** Acknowledge now or later (a reply that takes time): `reply` settles once. */
  | { readonly kind: 'reply'; readonly reply: Promise<readonly [0 | 1, unknown]> }
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
    approvals: new Set(),
    questions: new Set(),
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

const ok = (value: unknown): Promise<readonly [0 | 1, unknown]> => Promise.resolve([1, value] as const);

function settle(value: Promise<unknown>): Promise<readonly [0 | 1, unknown]> {
  return value.then(
    (v) => [1, v] as const,
    (error: unknown) => [0, encodeError(error)] as const,
  );
}

/**
 * Serve one relayed message of `a`, with the checks of the local host
 * channel: the operation's payload parsed by the same parsers (a call is
 * first put through `parseHostCall`, as a thread's is), an approval asked
 * once per call, a question once per call and at most {@link MAX_QUESTIONS}.
 */
export function serve(a: RelayedAttempt, kind: RelayKind, payload: unknown): Served {
  switch (kind) {
    case 'approve': {
      const call = parseHostCall([HostOp.approve, 1, a.capability, payload]);
      if (typeof call === 'string') return { kind: 'violation', reason: call };
      const parsed = HostApprovalRequest.safeParse(payload);
      if (!parsed.success) return { kind: 'violation', reason: 'a malformed approval request' };
      const id = parsed.data.toolCallId;
      if (a.approvals.has(id)) return { kind: 'violation', reason: `a second approval of call ${id}` };
      if (a.questions.has(id)) return { kind: 'violation', reason: `an approval of call ${id} after its question` };
      a.approvals.add(id);
      return { kind: 'reply', reply: settle(a.host.approve(parsed.data)) };
    }
    case 'task': {
      const call = parseHostCall([HostOp.task, 1, a.capability, payload]);
      if (typeof call === 'string') return { kind: 'violation', reason: call };
      const parsed = parseHostTaskRequest(payload);
      if (parsed === undefined) return { kind: 'violation', reason: 'a malformed task request' };
      return { kind: 'reply', reply: settle(a.host.task(parsed)) };
    }
    case 'events': {
      const call = parseHostCall([HostOp.events, 0, a.capability, payload]);
      if (typeof call === 'string') return { kind: 'violation', reason: call };
      const events = parseHostEvents(payload);
      if (typeof events === 'string') return { kind: 'violation', reason: `a malformed event batch: ${events}` };
      for (const e of events) {
        if (e[0] !== 'q') continue;
        if (a.questions.has(e[1])) return { kind: 'violation', reason: `a second question for call ${e[1]}` };
        a.questions.add(e[1]);
        if (a.questions.size > MAX_QUESTIONS) {
          return { kind: 'violation', reason: `over ${MAX_QUESTIONS} questions in one attempt` };
        }
      }
      a.host.events(events);
      return { kind: 'reply', reply: ok(undefined) };
    }
    case 'checkpoint': {
      const call = parseHostCall([HostOp.checkpoint, 1, a.capability, payload]);
      if (typeof call === 'string') return { kind: 'violation', reason: call };
      const parsed = parseHostCheckpoint(payload);
      if (typeof parsed === 'string') return { kind: 'violation', reason: `a malformed checkpoint: ${parsed}` };
      return { kind: 'reply', reply: settle(a.host.checkpoint(parsed)) };
    }
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
