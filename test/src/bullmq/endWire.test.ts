// How a worker host relays the end of an attempt to its owner (EndWire): the
// RunEnd itself, v8-serialised as the wire carries it, its error as an error
// shape, read back by one schema of the ends. Every status comes back as it
// left; anything else is refused with what is wrong. No Redis: the codec alone.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { deserialize, serialize } from 'node:v8';
import { decodeEnd, encodeEnd } from '@troupe/bullmq/internal';
import { isTroupeError, TroupeError, WorkerCrashedError } from '@troupe/core';
import { encodeError } from '@troupe/core/internal';
import type { AttemptEnd, RunEnd } from '@troupe/supervisor';

const usage = { inputTokens: 3, outputTokens: 5 };
const events = [{ type: 'message', agentId: 'a-1', at: 1 }] as never;
const state = {
  agentId: 'a-1',
  messages: [],
  turns: 1,
  usage,
  events: [],
  updates: [],
  metadata: {},
  todos: [],
} as never;

/** What the owner reads of `end` after the wire: encoded, serialised, deserialised, decoded. */
function relay(end: RunEnd): ReturnType<typeof decodeEnd> {
  return decodeEnd(deserialize(serialize(encodeEnd({ end, usage }))));
}

const ends: RunEnd[] = [
  { status: 'done', text: 'ok', updates: [{ op: 'set', key: 'k', value: 1 }] as never, events, turns: 2 },
  { status: 'done', text: '{"a":1}', output: { a: 1 }, updates: [], events: [], turns: 1 },
  { status: 'failed', error: new TroupeError('no', { code: 'ERR_TOOL_FAILED' }), events, turns: 3 },
  { status: 'incomplete', events, turns: 16 },
  { status: 'cancelled', reason: 'deadline', forced: true },
  { status: 'crashed', error: new WorkerCrashedError('the worker exited', 3), exitCode: 3 },
  { status: 'lost', error: new TroupeError('its host went away', { code: 'ERR_ATTEMPT_LOST' }) },
];

describe('the relayed end of an attempt', () => {
  for (const end of ends) {
    it(`${end.status}${'output' in end ? ' with output' : ''}: comes back as it left`, () => {
      const read = relay(end) as AttemptEnd;
      assert.equal(typeof read, 'object', String(read));
      assert.deepEqual(read.usage, usage);
      const { error: sent, ...rest } = end as RunEnd & { error?: Error };
      const { error: got, ...readRest } = read.end as RunEnd & { error?: Error };
      assert.deepEqual(readRest, rest);
      if (sent !== undefined) {
        assert.ok(got instanceof Error);
        assert.equal(got.message, sent.message);
        assert.equal((got as TroupeError).code, (sent as TroupeError).code);
      }
    });
  }

  it('crashed: the error is a WorkerCrashedError with the exit code, whatever error the host sent', () => {
    const read = decodeEnd([{ status: 'crashed', error: encodeError(new Error('boom')), exitCode: 9 }, usage]);
    assert.equal(typeof read, 'object', String(read));
    const end = (read as AttemptEnd).end;
    assert.ok(end.status === 'crashed' && end.error instanceof WorkerCrashedError);
    assert.ok(end.status === 'crashed' && isTroupeError(end.error, 'ERR_WORKER_CRASHED'));
    assert.equal(end.status === 'crashed' ? end.error.message : '', 'boom');
    assert.equal(end.status === 'crashed' ? end.exitCode : undefined, 9);
  });

  it('suspended: its state is checked as a checkpoint’s', () => {
    const ok = relay({ status: 'suspended', state, events: [], turns: 1 });
    assert.equal(typeof ok, 'object', String(ok));
    const bad = decodeEnd([{ status: 'suspended', state: { messages: 'no' }, events: [], turns: 1 }, usage]);
    assert.equal(typeof bad, 'string');
  });

  it('refuses anything else, saying what is wrong', () => {
    const refused: [unknown, RegExp][] = [
      ['not an array', /\[end, usage\]/],
      [[{ status: 'done' }], /\[end, usage\]/],
      [
        [
          { status: 'done', text: 'x', updates: [], events: [], turns: 1 },
          { inputTokens: -1, outputTokens: 0 },
        ],
        /usage/,
      ],
      [[{ status: 'won', text: 'x' }, usage], /status/],
      [[{ status: 'done', text: 7, updates: [], events: [], turns: 1 }, usage], /text/],
      [[{ status: 'done', text: 'x', updates: [], events: [], turns: 1.5 }, usage], /turns/],
      [[{ status: 'done', text: 'x', updates: [{ op: 1 }], events: [], turns: 1 }, usage], /updates/],
      [[{ status: 'failed', error: 'a string', events: [], turns: 1 }, usage], /error/],
      [[{ status: 'incomplete', events: [{ type: 'x' }], turns: 1 }, usage], /events/],
      [[{ status: 'cancelled', reason: 'bored', forced: false }, usage], /reason/],
      [[{ status: 'cancelled', reason: 'user', forced: false, extra: 1 }, usage], /extra|key/i],
      [[{ status: 'crashed', error: { name: 'E', message: 'm' }, exitCode: 'x' }, usage], /exitCode/],
    ];
    for (const [payload, why] of refused) {
      const read = decodeEnd(payload);
      assert.equal(typeof read, 'string', `${JSON.stringify(payload)} was read as ${JSON.stringify(read)}`);
      assert.match(read as string, why, JSON.stringify(payload));
    }
  });
});
