import { deserialize, serialize } from 'node:v8';
import { type CancelReason, isUsage, TroupeError, type Usage } from '@troupe/core';
import { decodeError, ErrorShape, findUnwalkable, isCapability } from '@troupe/core/internal';

/**
 * The messages between an API host and its worker hosts, over Redis pub/sub:
 * tuples in V8's serialization (structured clone's: what crosses a thread here
 * crosses a host the same way), never stored by Redis. Each side parses what
 * arrives by hand and refuses anything else; the payloads of relayed host
 * operations are then checked by the same parsers as a thread's.
 *
 * Host → owner (`toOwner`):
 * - `['claim', v, jobId, nonce, hostId, build]`: the host took the job; asks for the attempt.
 * - `['refuse', v, jobId, nonce, hostId, error]`: the host cannot run the job (an agent it
 *   does not know, another build); the job ends failed.
 * - `['relay', jobId, capability, rseq, kind, payload]`: a message of a granted attempt, in
 *   order from 1 (`rseq`); each one is acknowledged and sent again until it is.
 *
 * Owner → host (`toHost`):
 * - `['grant', jobId, nonce, grant]` / `['deny', jobId, nonce, error]`: the answer to a claim.
 * - `['ack', jobId, rseq, ok, value]`: a relayed message was served (`value`: its reply).
 * - `['cancel', jobId, reason]` / `['kill', jobId, reason]`.
 */
export const WIRE_VERSION = 2;

/** What a relayed message of an attempt is. */
export type RelayKind =
  | 'approve'
  | 'task'
  | 'events'
  | 'checkpoint'
  /** A slot took the attempt: `[threadId]`. */
  | 'placed'
  /** How the attempt ended: `[end, usage]` (see {@link encodeEnd}); the last message of an attempt. */
  | 'end'
  /** The host gives the attempt up (lock lost, drained): `[reason]`; the owner runs it again elsewhere. */
  | 'handback';

const RELAY_KINDS: ReadonlySet<unknown> = new Set([
  'approve',
  'task',
  'events',
  'checkpoint',
  'placed',
  'end',
  'handback',
]);
const REASONS: ReadonlySet<unknown> = new Set(['user', 'parent', 'deadline', 'shutdown']);

export type ToOwner =
  | readonly [kind: 'claim', v: number, jobId: string, nonce: string, hostId: string, build: string]
  | readonly [kind: 'refuse', v: number, jobId: string, nonce: string, hostId: string, error: ErrorShape]
  | readonly [kind: 'relay', jobId: string, capability: string, rseq: number, relay: RelayKind, payload: unknown];

/** What a grant hands the host: everything the job does not carry. */
export interface Grant {
  readonly capability: string;
  readonly agentId: string;
  readonly parentAgentId: string | undefined;
  readonly scope: unknown;
  readonly toolContext: Readonly<Record<string, unknown>>;
  readonly work: unknown;
  readonly timeoutMs: number | undefined;
  readonly features: number;
  readonly cancelled: CancelReason | undefined;
  /**
   * The owner's incarnation (its lease says it): the host stops the attempt when the owner's
   * lease names another one (the API host restarted under the same id: nobody awaits it).
   */
  readonly incarnation?: string | undefined;
}

export type ToHost =
  | readonly [kind: 'grant', jobId: string, nonce: string, grant: Grant]
  | readonly [kind: 'deny', jobId: string, nonce: string, error: ErrorShape]
  | readonly [kind: 'ack', jobId: string, rseq: number, ok: 0 | 1, value: unknown]
  | readonly [kind: 'cancel' | 'kill', jobId: string, reason: CancelReason];

/** Encode a message; `undefined` when it cannot be (a value that does not clone). */
export function encodeWire(message: ToOwner | ToHost): Buffer {
  return serialize(message);
}

const isString = (v: unknown, max = 256): v is string => typeof v === 'string' && v.length > 0 && v.length <= max;
const isSeq = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v > 0;

/** Read a message bytes at the owner's channel; a string says why it is refused. */
export function decodeToOwner(bytes: Buffer, maxBytes: number): ToOwner | string {
  const raw = read(bytes, maxBytes);
  if (typeof raw === 'string') return raw;
  switch (raw[0]) {
    case 'claim':
    case 'refuse': {
      if (raw.length !== 6) return `a ${raw[0]} is a 6-element array`;
      if (raw[1] !== WIRE_VERSION) return `wire version ${String(raw[1])}, this host speaks ${WIRE_VERSION}`;
      if (!isString(raw[2]) || !isString(raw[3], 64) || !isString(raw[4], 64)) return `a malformed ${raw[0]}`;
      if (raw[0] === 'claim' && !isString(raw[5], 64)) return 'a claim names its build';
      if (raw[0] === 'refuse' && !ErrorShape.safeParse(raw[5]).success) return 'a refusal carries an error shape';
      return raw as unknown as ToOwner;
    }
    case 'relay':
      if (raw.length !== 6) return 'a relayed message is a 6-element array';
      if (!isString(raw[1])) return 'a relayed message names its job';
      if (!isCapability(raw[2])) return 'the capability is malformed';
      if (!isSeq(raw[3])) return 'rseq must be a positive integer';
      if (!RELAY_KINDS.has(raw[4])) return `unknown relayed message ${String(raw[4])}`;
      return raw as unknown as ToOwner;
    default:
      return 'an unknown message';
  }
}

/** Read message bytes at a worker host's channel; a string says why it is refused. */
export function decodeToHost(bytes: Buffer, maxBytes: number): ToHost | string {
  const raw = read(bytes, maxBytes);
  if (typeof raw === 'string') return raw;
  if (!isString(raw[1])) return 'a message names its job';
  switch (raw[0]) {
    case 'grant': {
      const g = raw[3] as Record<string, unknown> | undefined;
      if (raw.length !== 4 || !isString(raw[2], 64) || typeof g !== 'object' || g === null) return 'a malformed grant';
      if (!isCapability(g.capability) || !isString(g.agentId)) return 'a grant without a capability or agent id';
      if (g.parentAgentId !== undefined && !isString(g.parentAgentId)) return 'a malformed grant (parentAgentId)';
      if (typeof g.toolContext !== 'object' || g.toolContext === null) return 'a malformed grant (toolContext)';
      if (g.timeoutMs !== undefined && !(typeof g.timeoutMs === 'number' && g.timeoutMs >= 0))
        return 'a malformed grant (timeoutMs)';
      if (typeof g.features !== 'number' || !Number.isSafeInteger(g.features)) return 'a malformed grant (features)';
      if (g.cancelled !== undefined && !REASONS.has(g.cancelled)) return 'a malformed grant (cancelled)';
      if (g.incarnation !== undefined && !isString(g.incarnation, 64)) return 'a malformed grant (incarnation)';
      return raw as unknown as ToHost;
    }
    case 'deny':
      if (raw.length !== 4 || !isString(raw[2], 64) || !ErrorShape.safeParse(raw[3]).success)
        return 'a malformed denial';
      return raw as unknown as ToHost;
    case 'ack':
      if (raw.length !== 5 || !isSeq(raw[2]) || (raw[3] !== 0 && raw[3] !== 1)) return 'a malformed acknowledgement';
      return raw as unknown as ToHost;
    case 'cancel':
    case 'kill':
      if (raw.length !== 3 || !REASONS.has(raw[2])) return `a malformed ${raw[0]}`;
      return raw as unknown as ToHost;
    default:
      return 'an unknown message';
  }
}

function read(bytes: Buffer, maxBytes: number): unknown[] | string {
  if (bytes.length > maxBytes) return `a message of ${bytes.length} bytes (at most ${maxBytes})`;
  let raw: unknown;
  try {
    raw = deserialize(bytes);
  } catch (error) {
    return `a message that cannot be read (${error instanceof Error ? error.message : String(error)})`;
  }
  if (!Array.isArray(raw) || raw.length === 0) return 'a message is a non-empty array';
  // A sparse array crosses in a few bytes and holds a walker for minutes: checked before anything reads it.
  const unwalkable = findUnwalkable(raw);
  if (unwalkable !== undefined) return `a message holding ${unwalkable}`;
  return raw;
}

/** Usage as it crosses (checked). */
export function checkUsage(value: unknown): Usage | undefined {
  return isUsage(value) ? value : undefined;
}

/** A worker host's refusal of a job, rebuilt as its class when it is one of ours. */
export function decodeRefusal(shape: unknown): Error {
  const parsed = ErrorShape.safeParse(shape);
  return parsed.success
    ? decodeError(parsed.data)
    : new TroupeError('the worker host refused the job', { code: 'ERR_HOST_REFUSED' });
}
