import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ContextUpdate, findNotJson, isTroupeError } from '@troupe/core';

const u = () => ContextUpdate.empty();

function refuses(make: () => unknown, path: RegExp, instead: RegExp): void {
  assert.throws(make, (e: unknown) => {
    assert.ok(isTroupeError(e, 'ERR_NOT_JSON'), String(e));
    assert.match((e as Error).message, path);
    assert.match((e as Error).message, instead);
    return true;
  });
}

class Point {
  constructor(readonly x: number) {}
}
const cycle: Record<string, unknown> = { a: 1 };
cycle.self = cycle;

describe('ContextUpdate refuses values JSON cannot carry exactly (ERR_NOT_JSON)', () => {
  const cases: [string, unknown, RegExp, RegExp][] = [
    ['undefined inside an object', { a: undefined }, /set "k"\.a is undefined/, /pass null, or delete the key/],
    ['undefined inside a list', [1, undefined], /set "k"\[1\] is undefined/, /pass null/],
    ['undefined itself', undefined, /set "k" is undefined/, /delete the key/],
    ['NaN', { n: Number.NaN }, /\.n is NaN/, /finite number/],
    ['Infinity', [Number.POSITIVE_INFINITY], /\[0\] is Infinity/, /finite number/],
    ['-Infinity', Number.NEGATIVE_INFINITY, /is -Infinity/, /finite number/],
    ['-0', { z: -0 }, /\.z is -0/, /pass 0/],
    ['a bigint', { b: 10n }, /\.b is a bigint/, /String\(n\)/],
    ['a function', { f: () => 1 }, /\.f is a function/, /plain data/],
    ['a symbol', { s: Symbol('x') }, /\.s is a symbol/, /string/],
    ['a symbol key', { [Symbol('k')]: 1 }, /symbol-keyed property/, /string key/],
    ['a Date', { when: new Date(0) }, /\.when is a Date/, /toISOString/],
    ['a Map', new Map([[1, 2]]), /set "k" is a Map/, /Object\.fromEntries/],
    ['a Set', { tags: new Set(['a']) }, /\.tags is a Set/, /\[\.\.\.set\]/],
    ['a typed array', { bytes: new Uint8Array(2) }, /\.bytes is a Uint8Array/, /Array\.from/],
    ['a class instance', { p: new Point(1) }, /\.p is an instance of Point/, /plain object/],
    ['a cycle', cycle, /\.self is a cycle/, /tree/],
    // biome-ignore lint/suspicious/noSparseArray: the hole is the point
    ['a list with holes', [1, , 3], /a list with holes/, /fill them/],
    [
      'a named property of a list',
      Object.assign([1], { extra: true }),
      /\.extra is a named property of a list/,
      /object/,
    ],
  ];
  for (const [what, value, path, instead] of cases) {
    it(`set refuses ${what}, naming the path and what to pass instead`, () => {
      refuses(() => u().set('k', value), path, instead);
    });
  }

  it('merge and append refuse the same, naming their operation', () => {
    refuses(() => u().merge('m', { when: new Date(0) }), /^merge "m"\.when is a Date/, /toISOString/);
    refuses(() => u().append('l', { n: Number.NaN }), /^append "l"\.n is NaN/, /finite/);
  });

  it('logEvent refuses the same (events are saved too)', () => {
    refuses(() => u().logEvent('audit', { at: new Date(0) }), /^logEvent "audit"\.at is a Date/, /toISOString/);
  });

  it('ContextUpdate.from refuses a raw operation holding such a value', () => {
    refuses(() => ContextUpdate.from([{ op: 'set', key: 'k', value: { b: 1n } }]), /\.b is a bigint/, /String/);
  });

  it('takes everything JSON carries: plain objects (also without a prototype), lists, strings, finite numbers, booleans, null, shared references', () => {
    const shared = { s: 1 };
    const bare = Object.assign(Object.create(null) as Record<string, unknown>, { x: 1 });
    const value = {
      a: [1, 'two', true, null, { deep: [0.5, -3] }],
      bare,
      left: shared,
      right: shared,
      __proto__key: 1,
    };
    assert.equal(findNotJson(value), undefined);
    const op = u().set('k', value).operations[0];
    assert.deepEqual(JSON.parse(JSON.stringify(op)), JSON.parse(JSON.stringify({ op: 'set', key: 'k', value })));
  });

  it('findNotJson can treat an undefined property as absent (for typed records)', () => {
    assert.equal(findNotJson({ a: undefined, b: 1 }, 'r', { undefinedPropertiesAreAbsent: true }), undefined);
    assert.equal(findNotJson([undefined], 'r', { undefinedPropertiesAreAbsent: true })?.path, 'r[0]');
  });
});
