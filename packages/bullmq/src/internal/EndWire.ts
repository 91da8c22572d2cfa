import { isUsage, type Operation, type SessionEvent, type Usage, WorkerCrashedError } from '@troupe/core';
import { decodeError, ErrorShape, encodeError, parseHostCheckpoint } from '@troupe/core/internal';
import type { AttemptEnd, RunEnd } from '@troupe/supervisor';
import { z } from 'zod';

/**
 * How an attempt ended, as a worker host relays it: `[end, usage]`, the end
 * as its host's transport gave it (the wire carries it v8-serialised), its
 * error as an error shape. The owner reads it back with {@link decodeEnd}.
 */
export function encodeEnd(ended: AttemptEnd): [unknown, Usage] {
  const end = ended.end;
  return ['error' in end ? { ...end, error: encodeError(end.error) } : end, ended.usage];
}

function isEvents(v: unknown): v is SessionEvent[] {
  if (!Array.isArray(v)) return false;
  for (const e of v) {
    if (typeof e !== 'object' || e === null) return false;
    const r = e as Record<string, unknown>;
    if (typeof r.type !== 'string' || typeof r.agentId !== 'string') return false;
  }
  return true;
}

// Each operation is checked again by the one reducer where it is applied.
const isOperations = (v: unknown): v is Operation[] =>
  Array.isArray(v) && v.every((o) => typeof o === 'object' && o !== null && typeof o.op === 'string');

const turns = z.number().int().nonnegative();
// Kept as sent (not copied): each event is checked again where it is logged.
const events = z.custom<SessionEvent[]>(isEvents, 'events must be session events');
const updates = z.custom<Operation[]>(isOperations, 'updates must be operations');
const error = ErrorShape.transform(decodeError);
// A suspended run's state is checked as a checkpoint's is: a loop state, its open calls walkable.
const state = z.unknown().superRefine((v, ctx) => {
  const checked = parseHostCheckpoint({ phase: 'after', state: v, calls: [] });
  if (typeof checked === 'string') ctx.addIssue({ code: 'custom', message: checked });
});

/** The ends a host may relay: the {@link RunEnd}s, each with exactly its own fields. */
const RelayedEnd = z.discriminatedUnion('status', [
  z.strictObject({
    status: z.literal('done'),
    text: z.string(),
    // Structured output (an agent with an output schema), only when there is some.
    output: z.unknown().optional(),
    updates,
    events,
    turns,
  }),
  z.strictObject({ status: z.literal('failed'), error, events, turns }),
  z.strictObject({ status: z.literal('incomplete'), events, turns }),
  z.strictObject({
    status: z.literal('cancelled'),
    reason: z.enum(['user', 'parent', 'deadline', 'shutdown']),
    forced: z.boolean(),
  }),
  z.strictObject({ status: z.literal('crashed'), error, exitCode: z.number().int().nullable() }),
  z.strictObject({ status: z.literal('suspended'), state, events, turns }),
  z.strictObject({ status: z.literal('lost'), error }),
]);

/** Read a relayed end at the owner; a string says what is wrong with it. */
export function decodeEnd(payload: unknown): AttemptEnd | string {
  if (!Array.isArray(payload) || payload.length !== 2) return 'an end is [end, usage]';
  const usage: unknown = payload[1];
  if (!isUsage(usage)) return 'usage must be non-negative token counts';
  const parsed = RelayedEnd.safeParse(payload[0]);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return `${issue?.path.length ? issue.path.join('.') : 'the end'}: ${issue?.message ?? 'malformed'}`;
  }
  let end = parsed.data as RunEnd;
  if (end.status === 'crashed') {
    // A crash is a WorkerCrashedError wherever it is read, whatever error the host sent.
    const sent: Error = end.error;
    if (!(sent instanceof WorkerCrashedError)) {
      end = { ...end, error: new WorkerCrashedError(sent.message, end.exitCode, { cause: sent }) };
    }
  }
  return { end, usage };
}
