import type { ModelDelta } from './Model.js';
import { findBadPending, findUnwalkable, isCapability, TELEMETRY_EVENT_COUNT, TELEMETRY_SHIFT } from './Protocol.js';
import { Request } from './Request.js';

/**
 * The host channel: one MessagePort per worker thread, worker → supervisor,
 * serving named operations only. Every message is a tuple checked by hand
 * at the port; anything else is refused.
 *
 * - call, worker → supervisor: `[op, seq, capability, payload]`. `seq` > 0
 *   asks for a reply; 0 is a notice. `capability` names the run the call is
 *   for: the supervisor serves it only while that run is in flight on the
 *   thread the port belongs to.
 * - reply, supervisor → worker: `[seq, ok, value]`; `ok` 1 carries the
 *   result, 0 an `ErrorShape` (code `ERR_HOST_REFUSED` for a refusal).
 */
export const HostOp = Object.freeze({
  /** Ask the approval handler about a call (reply: the handler's raw decision). */
  approve: 1,
  /** Run a subagent's own `task` call (reply: a `HostTaskResult`). */
  task: 2,
  /** Notice: a batch of the run's events (telemetry, model deltas, questions). */
  events: 3,
  /**
   * Notice: the run is over but left work running (a tool or model call
   * that ignored its cancel or timeout); the payload is the run's encoded
   * result, kept in case the worker has to be recycled.
   */
  holding: 4,
  /**
   * Save a turn of the run durably (reply once saved): `{ phase: 'before',
   * state, calls, receipt? }` before its tool calls run, `{ phase: 'after',
   * state, calls, receipt? }` once they have results. Offered only with a
   * durable store. The reply is a receipt (a string) that the run's next
   * checkpoint presents: a run has one checkpoint in flight.
   */
  checkpoint: 5,
});
/** One of {@link HostOp}. */
export type HostOp = (typeof HostOp)[keyof typeof HostOp];

/** A host-channel call as it crosses. */
export type HostCallWire = [op: HostOp, seq: number, capability: string, payload: unknown];
/** A host-channel reply as it crosses. */
export type HostReplyWire = [seq: number, ok: 0 | 1, value: unknown];

/** A checked host-channel call. */
export interface HostCall {
  readonly op: HostOp;
  readonly seq: number;
  readonly capability: string;
  readonly payload: unknown;
}

const OPS: ReadonlySet<unknown> = new Set(Object.values(HostOp));
const NOTICES: ReadonlySet<unknown> = new Set([HostOp.events, HostOp.holding]);

/** A checked {@link HostOp.checkpoint} payload. */
export interface HostCheckpoint {
  readonly phase: 'before' | 'after';
  /** The run's state (its outer shape checked here; the supervisor saves it as JSON). */
  readonly state: Record<string, unknown>;
  readonly calls: readonly { readonly id: string; readonly name: string; readonly idempotent: boolean }[];
  /**
   * The receipt the run's last checkpoint was answered with (absent for the
   * first of a dispatch): proof that the worker waited for that answer.
   */
  readonly receipt?: string | undefined;
}

/** Check the payload of a {@link HostOp.checkpoint} call; a string says what is wrong. */
export function parseHostCheckpoint(payload: unknown): HostCheckpoint | string {
  if (!isPlainRecord(payload)) return 'a checkpoint is an object';
  const { phase, state, calls, receipt } = payload;
  if (phase !== 'before' && phase !== 'after') return "checkpoint.phase must be 'before' or 'after'";
  if (!isPlainRecord(state) || typeof state.agentId !== 'string' || !Array.isArray(state.messages)) {
    return 'checkpoint.state must be a loop state';
  }
  // Saved, and walked again on a restore: its open calls are checked as a handed-back state's are.
  const badPending = findBadPending(state.pending);
  if (badPending !== undefined) return `checkpoint: ${badPending}`;
  if (receipt !== undefined && !isCapability(receipt))
    return 'checkpoint.receipt must be the receipt of the last reply';
  if (!Array.isArray(calls) || calls.length > 4096) return 'checkpoint.calls must be an array';
  for (const c of calls) {
    if (
      !isPlainRecord(c) ||
      typeof c.id !== 'string' ||
      typeof c.name !== 'string' ||
      typeof c.idempotent !== 'boolean'
    ) {
      return 'checkpoint.calls must be { id, name, idempotent }';
    }
  }
  return payload as unknown as HostCheckpoint;
}

/** Parse a call at the supervisor's end of a host channel; a string says what is wrong. */
export function parseHostCall(raw: unknown): HostCall | string {
  if (!Array.isArray(raw) || raw.length !== 4) return 'a host call is a 4-element array [op, seq, capability, payload]';
  const op: unknown = raw[0];
  const seq: unknown = raw[1];
  const capability: unknown = raw[2];
  if (!OPS.has(op)) return `unknown host operation ${typeof op === 'number' ? op : typeof op}`;
  if (typeof seq !== 'number' || !Number.isSafeInteger(seq) || seq < 0) return 'seq must be a non-negative integer';
  if (NOTICES.has(op) !== (seq === 0))
    return seq === 0 ? 'this operation needs a reply: seq > 0' : 'a notice has seq 0';
  if (!isCapability(capability)) return 'the capability is malformed';
  const unwalkable = findUnwalkable(raw[3]);
  if (unwalkable !== undefined) return `a payload holding ${unwalkable}`;
  return { op: op as HostOp, seq, capability, payload: raw[3] };
}

/** Parse a reply at the worker's end; `undefined` when it is not one. */
export function parseHostReply(raw: unknown): { seq: number; ok: boolean; value: unknown } | undefined {
  if (!Array.isArray(raw) || raw.length !== 3) return undefined;
  const seq: unknown = raw[0];
  if (typeof seq !== 'number' || !Number.isSafeInteger(seq) || seq <= 0) return undefined;
  if (raw[1] !== 0 && raw[1] !== 1) return undefined;
  return { seq, ok: raw[1] === 1, value: raw[2] };
}

/** The loop and tool events a worker forwards, by name (anything else is refused). */
export const TELEMETRY_EVENTS: ReadonlySet<string> = new Set([
  'tool.execute.start',
  'tool.execute.stop',
  'tool.execute.exception',
  'tool.execute.timeout',
  'tool.approval.invalid',
  'agent.turn',
  'context.events_dropped',
  'context.operation_dropped',
  'model.start',
  'model.stop',
  'model.error',
]);

const TELEMETRY_BITS: ReadonlyMap<string, number> = new Map(
  [...TELEMETRY_EVENTS].map((name, i) => [name, 1 << (TELEMETRY_SHIFT + i)]),
);
if (TELEMETRY_BITS.size !== TELEMETRY_EVENT_COUNT)
  throw new Error('TELEMETRY_EVENT_COUNT does not match TELEMETRY_EVENTS');

/** The `host` bit of one telemetry event (see {@link TELEMETRY_SHIFT}; 0 for a name that is not one). */
export function telemetryBit(name: string): number {
  return TELEMETRY_BITS.get(name) ?? 0;
}

/** One event of a {@link HostOp.events} batch. */
export type HostEvent =
  /** A telemetry event, to re-emit on the supervisor (its ids are the run's, set by the supervisor). */
  | readonly [kind: 't', name: string, payload: Record<string, unknown>]
  /** Model deltas of the run, in order. */
  | readonly [kind: 'd', deltas: readonly ModelDelta[]]
  /** A tool asked a person (it returned `pending`): open the request now, while the run goes on. */
  | readonly [kind: 'q', toolCallId: string, request: Request];

/** The most events one batch may carry (a worker flushes before it fills). */
export const MAX_HOST_EVENTS = 512;

const isPlainRecord = (v: unknown): v is Record<string, unknown> => {
  if (typeof v !== 'object' || v === null) return false;
  const proto: unknown = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
};

function isDelta(v: unknown): v is ModelDelta {
  if (!isPlainRecord(v)) return false;
  switch (v.type) {
    case 'text':
    case 'reasoning':
      return typeof v.text === 'string';
    case 'tool_call':
      return (
        typeof v.index === 'number' &&
        Number.isSafeInteger(v.index) &&
        v.index >= 0 &&
        (v.id === undefined || typeof v.id === 'string') &&
        (v.name === undefined || typeof v.name === 'string') &&
        (v.arguments === undefined || typeof v.arguments === 'string')
      );
    default:
      return false;
  }
}

/** Check the payload of a {@link HostOp.events} notice; a string says what is wrong. */
export function parseHostEvents(payload: unknown): HostEvent[] | string {
  if (!Array.isArray(payload) || payload.length === 0 || payload.length > MAX_HOST_EVENTS) {
    return `an event batch is an array of 1 to ${MAX_HOST_EVENTS} events`;
  }
  for (let i = 0; i < payload.length; i++) {
    const e: unknown = payload[i];
    if (!Array.isArray(e)) return `event ${i} is not an array`;
    switch (e[0]) {
      case 't':
        if (e.length !== 3 || typeof e[1] !== 'string' || !TELEMETRY_EVENTS.has(e[1]) || !isPlainRecord(e[2])) {
          return `event ${i}: not a known telemetry event`;
        }
        break;
      case 'd': {
        const deltas: unknown = e[1];
        if (e.length !== 2 || !Array.isArray(deltas) || deltas.length === 0 || deltas.length > MAX_HOST_EVENTS) {
          return `event ${i}: deltas must be 1 to ${MAX_HOST_EVENTS} model deltas`;
        }
        for (const d of deltas) if (!isDelta(d)) return `event ${i}: not a model delta`;
        break;
      }
      case 'q':
        if (e.length !== 3 || typeof e[1] !== 'string' || e[1].length === 0 || !Request.safeParse(e[2]).success) {
          return `event ${i}: a question is ['q', toolCallId, request]`;
        }
        break;
      default:
        return `event ${i}: unknown kind`;
    }
  }
  return payload as HostEvent[];
}
