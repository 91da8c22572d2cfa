// PersistenceRules.encodeWithState / encodeMessage must write what encode() writes
// (JSON.stringify of the value) and refuse what encode() refuses, with the same error, for any
// envelope or run record a store is given (PersistenceRules is public: custom stores call it).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sealMessage } from '@troupe/core/internal';
import { PersistenceRules as R } from '@troupe/supervisor';

function envelopeOf(messages: readonly unknown[], metadata: unknown = { customer: 'A-17' }): Record<string, unknown> {
  return {
    version: 3,
    agentId: 'agent_1',
    conversationId: 'c-1',
    agentName: 'lead',
    status: 'idle',
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
    },
    savedAt: 12.5,
  };
}

function outcome(fn: () => string): string {
  try {
    return `wrote ${fn()}`;
  } catch (error) {
    return `refused ${(error as { code?: string }).code}: ${(error as Error).message}`;
  }
}

function nested(depth: number): unknown {
  let v: unknown = 'deep';
  for (let i = 0; i < depth; i++) v = [v];
  return v;
}

describe('encodeWithState refuses exactly what encode() refuses', () => {
  it('a message nested just under the depth bound on its own, past it inside the envelope', () => {
    // A tool's result 998 lists deep: 1,002 levels below the envelope (state.messages[0].content…).
    const tool = { role: 'tool', toolCallId: 'c', name: 't', content: nested(998), isError: false };
    const envelope = envelopeOf([sealMessage({ role: 'user', content: 'hi' } as never), tool]);
    const plain = outcome(() => R.encode(envelope, 'envelope'));
    assert.match(plain, /^refused ERR_NOT_CLONEABLE/, 'encode() refuses it (premise)');
    assert.equal(
      outcome(() => R.encodeWithState(envelope, 'envelope')).slice(0, 60),
      plain.slice(0, 60),
      'encodeWithState must refuse the same envelope (it checks each message from depth 0, so the bound moves by 3)',
    );
  });

  it('two bad values: the same one is named (the first JSON would meet)', () => {
    const envelope = envelopeOf([{ role: 'user', content: Number.NaN }], { n: Number.NaN });
    const plain = outcome(() => R.encode(envelope, 'envelope'));
    assert.match(plain, /state\.messages\[0\]\.content is NaN/, 'encode() names the message (premise)');
    assert.equal(
      outcome(() => R.encodeWithState(envelope, 'envelope')),
      plain,
      'encodeWithState checks the envelope without its messages first, so it names state.metadata.n instead',
    );
  });

  it('a symbol-keyed property that is not enumerable on the state', () => {
    const envelope = envelopeOf([{ role: 'user', content: 'hi' }]);
    Object.defineProperty(envelope.state, Symbol('trace'), { value: 1, enumerable: false });
    const plain = outcome(() => R.encode(envelope, 'envelope'));
    assert.match(plain, /^refused ERR_NOT_JSON: .*symbol-keyed/, 'encode() refuses it (premise)');
    assert.equal(
      outcome(() => R.encodeWithState(envelope, 'envelope')),
      plain,
      'encodeWithState copies the state with a spread (enumerable keys only) and accepts it',
    );
  });
});

describe('encodeWithState writes what JSON.stringify writes', () => {
  it('a state or a messages list with a toJSON JSON.stringify calls', () => {
    const a = envelopeOf([{ role: 'user', content: 'hi' }]);
    Object.defineProperty(a.state, 'toJSON', { value: () => ({ redacted: true }), enumerable: false });
    assert.equal(R.encode(a, 'envelope'), JSON.stringify(a), 'encode() writes what JSON.stringify writes (premise)');
    assert.equal(
      R.encodeWithState(a, 'envelope'),
      R.encode(a, 'envelope'),
      "the state's toJSON must be honoured as encode() honours it",
    );
    const messages = [{ role: 'user', content: 'hi' }];
    Object.defineProperty(messages, 'toJSON', { value: () => [], enumerable: false });
    const b = envelopeOf(messages);
    assert.equal(
      R.encodeWithState(b, 'envelope'),
      R.encode(b, 'envelope'),
      "the messages list's toJSON must be honoured as encode() honours it",
    );
  });
});

describe('encodeWithState on odd values that held', () => {
  it('a frozen message with a getter, a shared list, an own __proto__ key, a message changed between saves', () => {
    let n = 0;
    const ticking = Object.freeze(
      Object.defineProperty({ role: 'user' }, 'content', { get: () => `tick ${++n}`, enumerable: true }),
    );
    const shared = [sealMessage({ role: 'user', content: 'a' } as never), ticking];
    const one = envelopeOf(shared);
    const two = { ...envelopeOf(shared), agentId: 'agent_2' };
    for (const envelope of [one, two, one]) {
      n = 0;
      const plain = R.encode(envelope, 'envelope');
      n = 0;
      assert.equal(R.encodeWithState(envelope, 'envelope'), plain, 'a getter is read at each save, never cached');
    }
    // A message read back from the store with an own "__proto__" key (JSON.parse makes it a key).
    const saved = R.encode(envelopeOf([JSON.parse('{"role":"user","content":"x","__proto__":"p"}')]), 'envelope');
    const read = R.parseWithState(saved);
    assert.equal(R.encodeWithState(read, 'envelope'), saved);
    assert.equal(R.encodeWithState(read, 'envelope'), saved);
    // The cache holds only what cannot change: a list replaced between saves is written anew.
    const open = { role: 'user', content: 'one' };
    const env = envelopeOf([open]);
    R.encodeWithState(env, 'envelope');
    (env.state as { messages: unknown[] }).messages = [Object.freeze({ ...open, content: 'two' })];
    assert.match(R.encodeWithState(env, 'envelope'), /"two"/);
  });
});
