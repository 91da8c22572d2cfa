import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  type AgentId,
  applyContextUpdate,
  ContextUpdate,
  isProtectedKey,
  isTroupeError,
  type Metadata,
  type Operation,
  PROTECTED_KEY_PREFIX,
  reduceMetadata,
  type SessionEvent,
  TRANSCRIPT_EVENT_TYPES,
  TroupeError,
} from '@troupe/core';

const agentId = 'agent_a' as AgentId;
const meta = { agentId, at: 1_000 };

function fold(initial: Metadata, update: ContextUpdate): Metadata {
  return reduceMetadata(initial, update.operations);
}

function err(fn: () => unknown): TroupeError {
  try {
    fn();
  } catch (error) {
    assert.ok(error instanceof TroupeError, `expected a TroupeError, got ${String(error)}`);
    return error;
  }
  assert.fail('expected a throw');
}

const u = (): ContextUpdate => ContextUpdate.empty();

describe('ContextUpdate builder', () => {
  it('is immutable: every method returns a new update', () => {
    const a = u();
    const b = a.set('k', 1);
    const c = b.append('l', 2);
    assert.equal(a.operations.length, 0);
    assert.equal(b.operations.length, 1);
    assert.equal(c.operations.length, 2);
    assert.ok(Object.isFrozen(c.operations));
    assert.ok(Object.isFrozen(c.operations[0]));
  });

  it('records operations in the order added', () => {
    const ops = u().set('a', 1).merge('b', { x: 1 }).append('c', 2).delete('d').logEvent('audit', { n: 1 }).operations;
    assert.deepEqual(ops, [
      { op: 'set', key: 'a', value: 1 },
      { op: 'merge', key: 'b', value: { x: 1 } },
      { op: 'append', key: 'c', value: 2 },
      { op: 'delete', key: 'd' },
      { op: 'logEvent', type: 'audit', data: { n: 1 } },
    ]);
  });

  it('logEvents lists the events only, in order', () => {
    const update = u().logEvent('one', { n: 1 }).set('k', 1).logEvent('two');
    assert.deepEqual(update.logEvents, [
      { type: 'one', data: { n: 1 } },
      { type: 'two', data: {} },
    ]);
  });

  it('isEmpty: only with no operation at all; an events-only update is not empty', () => {
    assert.equal(u().isEmpty, true);
    assert.equal(u().set('k', 1).isEmpty, false);
    assert.equal(u().logEvent('audit').isEmpty, false);
  });

  it('deep-freezes the values it is given', () => {
    const value = { nested: { list: [1] } };
    const op = u().set('k', value).operations[0] as Extract<Operation, { op: 'set' }>;
    assert.ok(Object.isFrozen(op.value));
    assert.ok(Object.isFrozen(value.nested.list));
  });

  it('refuses values that cannot be saved as JSON (a function), naming the path', () => {
    const e = err(() => u().set('k', { fn: () => 1 }));
    assert.ok(isTroupeError(e, 'ERR_NOT_JSON'));
    assert.match(e.message, /^set "k"\.fn is a function/);
  });

  it('merge takes a plain object only', () => {
    const e = err(() => u().merge('k', [1] as unknown as Record<string, unknown>));
    assert.ok(isTroupeError(e, 'ERR_CONTEXT_UPDATE'));
    assert.match(e.message, /plain object/);
  });

  it('refuses empty or non-string keys', () => {
    assert.ok(
      isTroupeError(
        err(() => u().set('', 1)),
        'ERR_CONTEXT_UPDATE',
      ),
    );
    assert.ok(
      isTroupeError(
        err(() => u().set(3 as unknown as string, 1)),
        'ERR_CONTEXT_UPDATE',
      ),
    );
  });

  it('refuses __proto__ as a key', () => {
    const e = err(() => u().set('__proto__', { polluted: true }));
    assert.ok(isTroupeError(e, 'ERR_CONTEXT_UPDATE'));
    assert.match(e.message, /__proto__/);
  });

  it('concat keeps both updates in order', () => {
    const both = u().set('a', 1).concat(u().append('a', 2).logEvent('x'));
    assert.deepEqual(
      both.operations.map((o) => o.op),
      ['set', 'append', 'logEvent'],
    );
  });
});

describe('reduceMetadata: append', () => {
  it('appends to a missing key start a list', () => {
    assert.deepEqual(fold({}, u().append('notes', 'a').append('notes', 'b')), { notes: ['a', 'b'] });
  });

  it('appends extend an existing list', () => {
    assert.deepEqual(fold({ log: ['a'] }, u().append('log', 'b')), { log: ['a', 'b'] });
  });

  it('set then append', () => {
    assert.deepEqual(fold({}, u().set('l', [1]).append('l', 2)), { l: [1, 2] });
  });

  it('append then set', () => {
    assert.deepEqual(fold({}, u().append('l', 1).set('l', [9])), { l: [9] });
  });

  it('append, append, delete, append gives [3]', () => {
    assert.deepEqual(fold({}, u().append('l', 1).append('l', 2).delete('l').append('l', 3)), { l: [3] });
  });

  it('2,000 appends stay in order', () => {
    let update = u();
    for (let i = 0; i < 2000; i++) update = update.append('seq', i);
    const out = fold({ seq: [-1] }, update);
    const seq = out.seq as number[];
    assert.equal(seq.length, 2001);
    for (let i = 0; i < 2001; i++) assert.equal(seq[i], i - 1);
    assert.ok(Object.isFrozen(seq));
  });

  it('interleaved keys keep their own order', () => {
    const out = fold({}, u().append('a', 1).append('b', 'x').append('a', 2).append('b', 'y').append('a', 3));
    assert.deepEqual(out, { a: [1, 2, 3], b: ['x', 'y'] });
  });

  it('many interleaved keys (more than the reducer keeps open) stay in order', () => {
    let update = u();
    for (let round = 0; round < 5; round++) for (let k = 0; k < 40; k++) update = update.append(`k${k}`, round);
    const out = fold({}, update);
    for (let k = 0; k < 40; k++) assert.deepEqual(out[`k${k}`], [0, 1, 2, 3, 4]);
  });

  it('append to null starts a list', () => {
    assert.deepEqual(fold({ l: null }, u().append('l', 1)), { l: [1] });
  });

  it('append to a non-list is a typed error', () => {
    for (const current of [1, 'str', { a: 1 }, true]) {
      const e = err(() => fold({ l: current }, u().append('l', 2)));
      assert.ok(isTroupeError(e, 'ERR_CONTEXT_UPDATE'));
      assert.match(e.message, /^append "l": the current value is \w+, not a list/);
    }
  });

  it('an appended list is a value: appending a list appends one item', () => {
    assert.deepEqual(fold({ l: [0] }, u().append('l', [1, 2])), { l: [0, [1, 2]] });
  });
});

describe('reduceMetadata: set, merge, delete', () => {
  it('set k null keeps the key', () => {
    const out = fold({ k: 1 }, u().set('k', null));
    assert.ok(Object.hasOwn(out, 'k'));
    assert.equal(out.k, null);
  });

  it('set replaces a key', () => {
    assert.deepEqual(fold({ k: { deep: 1 } }, u().set('k', 2)), { k: 2 });
  });

  it('deep merge {a:{b:1}} + {a:{c:2}}', () => {
    assert.deepEqual(fold({ s: { a: { b: 1 } } }, u().merge('s', { a: { c: 2 } })), { s: { a: { b: 1, c: 2 } } });
  });

  it('merge: right wins', () => {
    assert.deepEqual(fold({ s: { a: 1, b: 1 } }, u().merge('s', { b: 2 })), { s: { a: 1, b: 2 } });
  });

  it('merge over a non-object replaces it', () => {
    for (const current of [1, 'x', [1, 2], null, true]) {
      assert.deepEqual(fold({ s: current }, u().merge('s', { a: 1 })), { s: { a: 1 } }, String(current));
    }
    assert.deepEqual(fold({ s: { a: 5 } }, u().merge('s', { a: { b: 1 } })), { s: { a: { b: 1 } } });
  });

  it('merge into a missing key creates it', () => {
    assert.deepEqual(fold({}, u().merge('s', { a: 1 })), { s: { a: 1 } });
  });

  it('arrays are replaced by merge, never concatenated', () => {
    assert.deepEqual(fold({ s: { list: [1, 2], keep: true } }, u().merge('s', { list: [3] })), {
      s: { list: [3], keep: true },
    });
  });

  it('two merges into the same key compose', () => {
    assert.deepEqual(
      fold(
        {},
        u()
          .merge('s', { a: { b: 1 } })
          .merge('s', { a: { c: 2 } })
          .merge('s', { d: 3 }),
      ),
      {
        s: { a: { b: 1, c: 2 }, d: 3 },
      },
    );
  });

  it('delete removes a key; deleting a missing key is a no-op', () => {
    const out = fold({ a: 1, b: 2 }, u().delete('a').delete('zzz'));
    assert.deepEqual(out, { b: 2 });
    assert.equal(Object.hasOwn(out, 'a'), false);
  });

  it('delete then set brings a key back', () => {
    assert.deepEqual(fold({ a: 1 }, u().delete('a').set('a', 2)), { a: 2 });
    assert.deepEqual(fold({ a: { x: 1 } }, u().delete('a').merge('a', { y: 1 })), { a: { y: 1 } });
  });

  it('the differential case: ten mixed operations', () => {
    const initial = { existing: [0], counter: 1, settings: { a: { b: 1 } } };
    const update = u()
      .append('new', 'first')
      .set('counter', 5)
      .merge('settings', { a: { c: 2 } })
      .append('existing', 1)
      .delete('existing')
      .append('existing', 'restored')
      .append('new', 'second')
      .merge('settings', { d: 3 })
      .set('replaced', [10])
      .set('replaced', [10, 11, 12]);
    assert.equal(update.operations.length, 10);
    assert.deepEqual(fold(initial, update), {
      existing: ['restored'],
      counter: 5,
      settings: { a: { b: 1, c: 2 }, d: 3 },
      new: ['first', 'second'],
      replaced: [10, 11, 12],
    });
  });

  it('never mutates the input metadata, and freezes the output deeply', () => {
    const initial = { existing: [0], settings: { a: { b: 1 } }, keep: { x: 1 } };
    const snapshot = structuredClone(initial);
    const out = fold(
      initial,
      u()
        .append('existing', 1)
        .merge('settings', { a: { c: 2 } })
        .set('n', { deep: [1] })
        .delete('keep'),
    );
    assert.deepEqual(initial, snapshot);
    assert.notEqual(out.existing, initial.existing);
    assert.ok(Object.isFrozen(out));
    assert.ok(Object.isFrozen(out.existing));
    assert.ok(Object.isFrozen(out.settings));
    assert.ok(Object.isFrozen((out.settings as { a: object }).a));
    assert.ok(Object.isFrozen((out.n as { deep: number[] }).deep));
  });

  it('an update with no metadata operation returns the input itself', () => {
    const initial = Object.freeze({ a: 1 });
    assert.equal(fold(initial, u()), initial);
    assert.equal(fold(initial, u().logEvent('audit')), initial);
  });

  it('one update folded twice from the same input gives equal, independent results', () => {
    const update = u().append('l', 1).merge('m', { a: 1 });
    const one = fold({ l: [0] }, update);
    const two = fold({ l: [0] }, update);
    assert.deepEqual(one, two);
    assert.notEqual(one.l, two.l);
  });

  it('folding an output again appends to a copy, not the frozen output', () => {
    const once = fold({}, u().append('l', 1));
    const twice = fold(once, u().append('l', 2));
    assert.deepEqual(once, { l: [1] });
    assert.deepEqual(twice, { l: [1, 2] });
  });
});

describe('reduceMetadata: raw operations are checked', () => {
  it('an unknown operation is an error, never skipped', () => {
    const raw = [
      { op: 'set', key: 'a', value: 1 },
      { op: 'increment', key: 'a' },
    ] as unknown as Operation[];
    const e = err(() => reduceMetadata({}, raw));
    assert.ok(isTroupeError(e, 'ERR_CONTEXT_UPDATE'));
    assert.match(e.message, /^unknown operation "increment"/);
  });

  it('an unknown operation with a protected key is still reported as unknown', () => {
    const raw = [{ op: 'bump', key: 'troupe.x' }] as unknown as Operation[];
    assert.match(err(() => reduceMetadata({}, raw)).message, /unknown operation "bump"/);
  });

  it('a non-object operation is an unknown operation, not a TypeError', () => {
    for (const bad of [null, 3, 'set', undefined]) {
      const e = err(() => reduceMetadata({}, [bad] as unknown as Operation[]));
      assert.ok(isTroupeError(e, 'ERR_CONTEXT_UPDATE'), String(bad));
      assert.match(e.message, /unknown operation/);
    }
  });

  it('a raw merge with a non-object value is refused', () => {
    const raw = [{ op: 'merge', key: 'a', value: [1] }] as unknown as Operation[];
    assert.ok(
      isTroupeError(
        err(() => reduceMetadata({}, raw)),
        'ERR_CONTEXT_UPDATE',
      ),
    );
  });

  it('raw values are frozen in the output, and the raw operations are not changed otherwise', () => {
    const value = { list: [1] };
    const out = reduceMetadata({}, [{ op: 'set', key: 'k', value }]);
    assert.ok(Object.isFrozen(out.k));
    assert.deepEqual(out, { k: { list: [1] } });
  });

  it('a raw __proto__ key is refused', () => {
    const raw = JSON.parse('[{"op":"set","key":"__proto__","value":{"polluted":true}}]') as Operation[];
    assert.ok(
      isTroupeError(
        err(() => reduceMetadata({}, raw)),
        'ERR_CONTEXT_UPDATE',
      ),
    );
  });

  it('a raw merge patch with an own __proto__ key stays data', () => {
    const raw = JSON.parse('[{"op":"merge","key":"m","value":{"__proto__":{"polluted":true},"a":1}}]') as Operation[];
    const out = reduceMetadata({}, raw);
    const m = out.m as Record<string, unknown>;
    assert.equal(Object.getPrototypeOf(m), Object.prototype);
    assert.equal(m.a, 1);
    assert.ok(Object.hasOwn(m, '__proto__'));
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
  });

  it('an error applies nothing: the input is unchanged', () => {
    const initial = { l: [0], s: 'x' };
    const snapshot = structuredClone(initial);
    assert.throws(() => fold(initial, u().append('l', 1).set('z', 1).append('s', 2)), { code: 'ERR_CONTEXT_UPDATE' });
    assert.deepEqual(initial, snapshot);
  });

  it('ContextUpdate.from rebuilds an update from raw operations', () => {
    const original = u().set('a', 1).merge('b', { x: 1 }).append('c', 2).delete('d').logEvent('audit', { n: 1 });
    const rebuilt = ContextUpdate.from(structuredClone(original.operations));
    assert.deepEqual(rebuilt.operations, original.operations);
    assert.deepEqual(fold({ d: 1 }, rebuilt), { a: 1, b: { x: 1 }, c: [2] });
  });

  it('ContextUpdate.from refuses an unknown operation', () => {
    const e = err(() => ContextUpdate.from([{ op: 'set', key: 'a', value: 1 }, { op: 'frobnicate' }]));
    assert.ok(isTroupeError(e, 'ERR_CONTEXT_UPDATE'));
    assert.match(e.message, /unknown operation "frobnicate"/);
    assert.match(err(() => ContextUpdate.from([null])).message, /unknown operation/);
  });
});

describe('protected keys (troupe.*)', () => {
  it('isProtectedKey', () => {
    assert.equal(PROTECTED_KEY_PREFIX, 'troupe.');
    assert.equal(isProtectedKey('troupe.runs'), true);
    assert.equal(isProtectedKey('troupe'), false);
    assert.equal(isProtectedKey('my.troupe.x'), false);
  });

  it('cannot be set, merged, appended or deleted by a tool (refused at construction)', () => {
    const attempts: [string, () => unknown][] = [
      ['set', () => u().set('troupe.x', 1)],
      ['merge', () => u().merge('troupe.x', { a: 1 })],
      ['append', () => u().append('troupe.x', 1)],
      ['delete', () => u().delete('troupe.x')],
    ];
    for (const [op, attempt] of attempts) {
      const e = err(attempt);
      assert.ok(isTroupeError(e, 'ERR_PROTECTED_KEY'), op);
      assert.match(e.message, new RegExp(`^${op} "troupe\\.x": keys starting with "troupe\\." are owned by Troupe`));
    }
  });

  it('are refused again at apply: raw operations through reduceMetadata', () => {
    for (const op of ['set', 'merge', 'append', 'delete'] as const) {
      const raw = [{ op, key: 'troupe.x', value: op === 'merge' ? { a: 1 } : 1 }] as unknown as Operation[];
      assert.ok(
        isTroupeError(
          err(() => reduceMetadata({ 'troupe.x': [1] }, raw)),
          'ERR_PROTECTED_KEY',
        ),
        op,
      );
    }
  });

  it('are refused in ContextUpdate.from', () => {
    const e = err(() => ContextUpdate.from([{ op: 'delete', key: 'troupe.runs' }]));
    assert.ok(isTroupeError(e, 'ERR_PROTECTED_KEY'));
  });

  it('library code may write them with allowProtected', () => {
    const raw: Operation[] = [{ op: 'set', key: 'troupe.runs', value: 1 }];
    assert.deepEqual(reduceMetadata({}, raw, { allowProtected: true }), { 'troupe.runs': 1 });
  });

  it('a tool can read around them: other keys still apply', () => {
    assert.deepEqual(fold({ 'troupe.runs': 3 }, u().set('mine', 1)), { 'troupe.runs': 3, mine: 1 });
  });
});

describe('logEvent and applyContextUpdate', () => {
  it('refuses transcript types as events', () => {
    assert.ok(TRANSCRIPT_EVENT_TYPES.has('user_message'));
    for (const type of TRANSCRIPT_EVENT_TYPES) {
      const e = err(() => u().logEvent(type, {}));
      assert.ok(isTroupeError(e, 'ERR_CONTEXT_UPDATE'), type);
      assert.match(e.message, /transcript types cannot be logged/);
    }
  });

  it('refuses transcript types arriving raw', () => {
    const raw = [{ op: 'logEvent', type: 'user_message', data: { text: 'smuggled' } }] as Operation[];
    assert.ok(
      isTroupeError(
        err(() => reduceMetadata({}, raw)),
        'ERR_CONTEXT_UPDATE',
      ),
    );
    assert.ok(
      isTroupeError(
        err(() => ContextUpdate.from(raw)),
        'ERR_CONTEXT_UPDATE',
      ),
    );
  });

  it('logEvent touches no metadata', () => {
    const initial = Object.freeze({ a: 1 });
    const applied = applyContextUpdate(u().logEvent('audit', { n: 1 }), { metadata: initial, log: [] }, meta);
    assert.equal(applied.metadata, initial);
    assert.equal(applied.events.length, 1);
  });

  it('applies metadata operations first, then events, each in order', () => {
    const log: SessionEvent[] = [{ type: 'earlier', data: {}, agentId, at: 1 }];
    const update = u().logEvent('first', { n: 1 }).append('l', 1).logEvent('second', { n: 2 }).append('l', 2);
    const applied = applyContextUpdate(update, { metadata: {}, log }, meta);
    assert.deepEqual(applied.metadata, { l: [1, 2] });
    assert.deepEqual(
      applied.events.map((e) => [e.type, e.data, e.agentId, e.at]),
      [
        ['first', { n: 1 }, agentId, 1_000],
        ['second', { n: 2 }, agentId, 1_000],
      ],
    );
    assert.deepEqual(
      applied.log?.map((e) => e.type),
      ['earlier', 'first', 'second'],
    );
    assert.equal(log.length, 1, 'the target log is not mutated');
    assert.equal(applied.dropped, undefined);
  });

  it('a target with no session log drops events with one report naming the count and types', () => {
    const update = u().logEvent('audit', { n: 1 }).set('k', 1).logEvent('audit', { n: 2 }).logEvent('sub_dispatch');
    const applied = applyContextUpdate(update, { metadata: {} }, meta);
    assert.deepEqual(applied.metadata, { k: 1 }, 'metadata still applies');
    assert.deepEqual(applied.dropped, { count: 3, types: ['audit', 'sub_dispatch'] });
    assert.equal(applied.log, undefined);
    assert.deepEqual(applied.events, []);
  });

  it('no dropped report when there are no events', () => {
    const applied = applyContextUpdate(u().set('k', 1), { metadata: {} }, meta);
    assert.equal(applied.dropped, undefined);
    assert.deepEqual(applied.metadata, { k: 1 });
  });

  it('a failing operation fails the whole apply (no events recorded)', () => {
    assert.throws(
      () => applyContextUpdate(u().logEvent('audit').append('s', 1), { metadata: { s: 'x' }, log: [] }, meta),
      {
        code: 'ERR_CONTEXT_UPDATE',
      },
    );
  });
});
