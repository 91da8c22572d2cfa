// PersistenceRules.encodeWithState writes a state envelope (or a run record) with each sealed
// message's JSON kept from its first save. It must write exactly what encode() writes, refuse
// exactly what encode() refuses, and never write a stale copy of a message that can change.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { deepFreeze, type Message } from '@troupe/core';
import { sealMessage } from '@troupe/core/internal';
import { PersistenceRules as R } from '@troupe/supervisor';
import fc from 'fast-check';

function envelopeOf(messages: readonly unknown[], metadata: unknown = { customer: 'A-17' }): Record<string, unknown> {
  return {
    version: 3,
    agentId: 'agent_1',
    conversationId: 'c-1',
    agentName: 'lead',
    status: 'idle',
    pendingRequest: undefined,
    state: {
      agentId: 'agent_1',
      messages,
      todos: [],
      metadata,
      updates: [],
      events: [],
      turns: 1,
      usage: { inputTokens: 1, outputTokens: 2 },
      failedTurns: 0,
      pending: undefined,
    },
    runId: 'run_1',
    savedAt: 12.5,
  };
}

/** The text written, or the error refusing it. */
function written(fn: () => string): string {
  try {
    return fn();
  } catch (error) {
    return `refused ${(error as { code?: string }).code}: ${(error as Error).message}`;
  }
}

function refusal(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    return `${(error as { code?: string }).code}: ${(error as Error).message}`;
  }
  return 'accepted';
}

const text = fc.string({ unit: 'binary', maxLength: 40 });
const message: fc.Arbitrary<Message> = fc.oneof(
  fc.record({ role: fc.constantFrom('system' as const, 'user' as const, 'assistant' as const), content: text }),
  fc.record({
    role: fc.constant('assistant' as const),
    content: text,
    toolCalls: fc.array(fc.record({ id: text, name: text, arguments: fc.jsonValue() }), { maxLength: 2 }),
  }),
  fc.record({
    role: fc.constant('tool' as const),
    toolCallId: text,
    name: text,
    content: fc.oneof(text, fc.jsonValue()),
    isError: fc.boolean(),
  }),
);

describe('PersistenceRules.encodeWithState', () => {
  it('writes what encode() writes, for sealed and unsealed messages, saved once or many times', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(message, fc.boolean()), { maxLength: 8 }),
        fc.dictionary(fc.string({ unit: 'binary', maxLength: 8 }), fc.jsonValue()),
        (drawn, metadata) => {
          const messages = drawn.map(([m, seal]) => (seal ? sealMessage(m) : m));
          const envelope = envelopeOf(messages, metadata);
          // What encode() writes or refuses (fast-check's JSON values hold -0, which is refused).
          const plain = written(() => R.encode(envelope, 'envelope'));
          // Twice: the second save reads sealed messages from the cache.
          assert.equal(
            written(() => R.encodeWithState(envelope, 'envelope')),
            plain,
          );
          assert.equal(
            written(() => R.encodeWithState(envelope, 'envelope')),
            plain,
          );
          const run = { runId: 'r', state: envelope.state };
          assert.equal(
            written(() => R.encodeWithState(run, 'run r')),
            written(() => R.encode(run, 'run r')),
          );
        },
      ),
      { numRuns: 400 },
    );
  });

  it('refuses what encode() refuses, with the same error', () => {
    const sealed = sealMessage({ role: 'user', content: 'hi' } as Message);
    const cases: Record<string, unknown>[] = [
      envelopeOf([sealed, { role: 'tool', toolCallId: 'c', name: 't', content: new Date(0), isError: false }]),
      envelopeOf([sealed, undefined]),
      envelopeOf([sealed], { when: new Date(0) }),
      envelopeOf([sealed], { n: Number.NaN }),
      // biome-ignore lint/suspicious/noSparseArray: a list with a hole is what is refused
      envelopeOf([sealed, , sealed]),
      { ...envelopeOf([sealed]), extra: () => 1 },
    ];
    for (const envelope of cases) {
      const expected = refusal(() => R.encode(envelope, 'envelope'));
      assert.notEqual(expected, 'accepted');
      assert.equal(
        refusal(() => R.encodeWithState(envelope, 'envelope')),
        expected,
      );
    }
    // Not a state at all: written as encode() writes it (the envelope's checks are not the encoder's).
    const odd = { ...envelopeOf([sealed]), state: 'not a state' };
    assert.equal(R.encodeWithState(odd, 'envelope'), R.encode(odd, 'envelope'));
  });

  it('writes a message that can still change as it is at each save', () => {
    const open = { role: 'user', content: 'first' };
    const envelope = envelopeOf([open]);
    assert.match(R.encodeWithState(envelope, 'envelope'), /"first"/);
    open.content = 'second';
    assert.match(R.encodeWithState(envelope, 'envelope'), /"second"/);
    // Frozen at the top only (its list can change): not cached either.
    const shallow = Object.freeze({ role: 'tool', toolCallId: 'c', name: 't', content: ['a'], isError: false });
    const withList = envelopeOf([shallow]);
    assert.match(R.encodeWithState(withList, 'envelope'), /\["a"\]/);
    (shallow.content as string[]).push('b');
    assert.match(R.encodeWithState(withList, 'envelope'), /\["a","b"\]/);
  });

  it('seals only messages of primitives: a tool value or a model call stays the caller’s to change', () => {
    assert.equal(Object.isFrozen(sealMessage({ role: 'user', content: 'x' } as Message)), true);
    const value = { rows: [1] };
    const result = sealMessage({ role: 'tool', toolCallId: 'c', name: 't', content: value, isError: false } as Message);
    assert.equal(Object.isFrozen(result), false);
    assert.equal(Object.isFrozen(value), false);
    const call = { id: 'c', name: 't', arguments: { q: 1 } };
    assert.equal(Object.isFrozen(sealMessage({ role: 'assistant', content: '', toolCalls: [call] } as Message)), false);
    assert.equal(Object.isFrozen(call.arguments), false);
    // A message a caller froze deeply itself is cached as well.
    const mine = deepFreeze({ role: 'assistant', content: 'done' });
    assert.equal(R.encodeWithState(envelopeOf([mine]), 'envelope'), R.encode(envelopeOf([mine]), 'envelope'));
  });
});

describe('PersistenceRules.parseWithState', () => {
  it('seals the text messages of what it reads, and what it reads is written back the same', () => {
    const saved = R.encode(
      envelopeOf([
        { role: 'user', content: 'hi' },
        { role: 'tool', toolCallId: 'c', name: 't', content: { rows: [1] }, isError: false },
      ]),
      'envelope',
    );
    const read = R.parseWithState(saved) as { state: { messages: object[] } };
    const [text, tool] = read.state.messages;
    assert.equal(Object.isFrozen(text), true);
    assert.equal(Object.isFrozen(tool), false, 'a message holding an object is left as it is');
    assert.equal(R.encodeWithState(read, 'envelope'), saved);
    assert.equal(R.encodeWithState(read, 'envelope'), saved);
  });
});
