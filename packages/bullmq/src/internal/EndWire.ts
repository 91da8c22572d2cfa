import {
  type CancelReason,
  isUsage,
  type LoopState,
  NO_USAGE,
  type Operation,
  type SessionEvent,
  type Usage,
  WorkerCrashedError,
} from '@troupe/core';
import { decodeError, ErrorShape, encodeError, parseHostCheckpoint } from '@troupe/core/internal';
import type { AttemptEnd, RunEnd } from '@troupe/supervisor';

/**
 * How an attempt ended, as a worker host relays it: `[end, usage]`, the end a
 * tuple by status, its errors as error shapes.
 */
export function encodeEnd(ended: AttemptEnd): [unknown[], Usage] {
  const e = ended.end;
  let wire: unknown[];
  switch (e.status) {
    case 'done':
      // Structured output (an agent with an output schema) last, only when there is some.
      wire =
        e.output === undefined
          ? ['done', e.text, e.updates, e.events, e.turns]
          : ['done', e.text, e.updates, e.events, e.turns, e.output];
      break;
    case 'failed':
      wire = ['failed', encodeError(e.error), e.events, e.turns];
      break;
    case 'incomplete':
      wire = ['incomplete', e.events, e.turns];
      break;
    case 'cancelled':
      wire = ['cancelled', e.reason, e.forced];
      break;
    case 'crashed':
      wire = ['crashed', encodeError(e.error), e.exitCode];
      break;
    case 'suspended':
      wire = ['suspended', e.state, e.events, e.turns];
      break;
    case 'lost':
      wire = ['lost', encodeError(e.error)];
      break;
    default:
      e satisfies never;
      wire = [];
  }
  return [wire, ended.usage];
}

const REASONS: ReadonlySet<unknown> = new Set(['user', 'parent', 'deadline', 'shutdown']);

const isTurns = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;

function isEvents(v: unknown): v is SessionEvent[] {
  if (!Array.isArray(v)) return false;
  for (const e of v) {
    if (typeof e !== 'object' || e === null) return false;
    const r = e as Record<string, unknown>;
    if (typeof r.type !== 'string' || typeof r.agentId !== 'string') return false;
  }
  return true;
}

function isOperations(v: unknown): v is Operation[] {
  // Each operation is checked again by the one reducer where it is applied.
  return Array.isArray(v) && v.every((o) => typeof o === 'object' && o !== null && typeof o.op === 'string');
}

function error(v: unknown): Error | undefined {
  const shape = ErrorShape.safeParse(v);
  return shape.success ? decodeError(shape.data) : undefined;
}

/** Read a relayed end at the owner; a string says what is wrong with it. */
export function decodeEnd(payload: unknown): AttemptEnd | string {
  if (!Array.isArray(payload) || payload.length !== 2 || !Array.isArray(payload[0])) return 'an end is [end, usage]';
  const usage: Usage = isUsage(payload[1]) ? payload[1] : NO_USAGE;
  if (!isUsage(payload[1])) return 'usage must be non-negative token counts';
  const w = payload[0] as unknown[];
  let end: RunEnd;
  switch (w[0]) {
    case 'done':
      if (
        (w.length !== 5 && w.length !== 6) ||
        typeof w[1] !== 'string' ||
        !isOperations(w[2]) ||
        !isEvents(w[3]) ||
        !isTurns(w[4]) ||
        (w.length === 6 && w[5] === undefined)
      )
        return 'a malformed done';
      end =
        w.length === 6
          ? { status: 'done', text: w[1], updates: w[2], events: w[3], turns: w[4], output: w[5] }
          : { status: 'done', text: w[1], updates: w[2], events: w[3], turns: w[4] };
      break;
    case 'failed': {
      const e = error(w[1]);
      if (w.length !== 4 || e === undefined || !isEvents(w[2]) || !isTurns(w[3])) return 'a malformed failed';
      end = { status: 'failed', error: e, events: w[2], turns: w[3] };
      break;
    }
    case 'incomplete':
      if (w.length !== 3 || !isEvents(w[1]) || !isTurns(w[2])) return 'a malformed incomplete';
      end = { status: 'incomplete', events: w[1], turns: w[2] };
      break;
    case 'cancelled':
      if (w.length !== 3 || !REASONS.has(w[1]) || typeof w[2] !== 'boolean') return 'a malformed cancelled';
      end = { status: 'cancelled', reason: w[1] as CancelReason, forced: w[2] };
      break;
    case 'crashed': {
      const e = error(w[1]);
      if (w.length !== 3 || e === undefined || !(w[2] === null || Number.isSafeInteger(w[2])))
        return 'a malformed crashed';
      const crashed =
        e instanceof WorkerCrashedError ? e : new WorkerCrashedError(e.message, w[2] as number | null, { cause: e });
      end = { status: 'crashed', error: crashed, exitCode: w[2] as number | null };
      break;
    }
    case 'suspended': {
      if (w.length !== 4 || !isEvents(w[2]) || !isTurns(w[3])) return 'a malformed suspended';
      // The state is checked as a checkpoint's is: a loop state, its open calls walkable.
      const checked = parseHostCheckpoint({ phase: 'after', state: w[1], calls: [] });
      if (typeof checked === 'string') return `suspended: ${checked}`;
      end = { status: 'suspended', state: w[1] as LoopState, events: w[2], turns: w[3] };
      break;
    }
    case 'lost': {
      const e = error(w[1]);
      if (w.length !== 2 || e === undefined) return 'a malformed lost';
      end = { status: 'lost', error: e };
      break;
    }
    default:
      return `an unknown end ${JSON.stringify(String(w[0]))}`;
  }
  return { end, usage };
}
