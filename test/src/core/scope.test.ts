import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { serialize } from 'node:v8';
import {
  assertCloneable,
  DEFAULT_SCOPE_BUDGET_BYTES,
  deepFreeze,
  defineScope,
  findUncloneable,
  InvalidArgumentError,
  isCloneable,
  isDeepFrozen,
  isTroupeError,
  sealScope,
  serializedSize,
} from '@troupe/core';
import { cloneableSizeBound, freezeReceived, serializedSizeAtMost } from '@troupe/core/internal';
import fc from 'fast-check';
import { z } from 'zod';

const AgentScope = z.object({
  userId: z.string(),
  orgId: z.string(),
  role: z.enum(['admin', 'member']),
  user: z.object({ name: z.string(), tags: z.array(z.string()) }).optional(),
});

function thrown(fn: () => unknown): Error {
  try {
    fn();
  } catch (error) {
    assert.ok(error instanceof Error, 'expected an Error');
    return error;
  }
  assert.fail('expected a throw');
}

describe('defineScope: parsed at the edge', () => {
  it('parses a valid scope with the integrator schema', () => {
    const def = defineScope(AgentScope);
    const scope = def.parse({ userId: 'u1', orgId: 'o1', role: 'admin' });
    assert.deepEqual(scope, { userId: 'u1', orgId: 'o1', role: 'admin' });
    assert.equal(def.budgetBytes, DEFAULT_SCOPE_BUDGET_BYTES);
    assert.equal(DEFAULT_SCOPE_BUDGET_BYTES, 4096);
  });

  it('a schema error is an InvalidArgumentError naming the path', () => {
    const err = thrown(() => defineScope(AgentScope).parse({ userId: 'u1', orgId: 'o1', role: 'owner' }));
    assert.ok(err instanceof InvalidArgumentError);
    assert.ok(isTroupeError(err, 'ERR_INVALID_ARGUMENT'));
    assert.match(err.message, /^scope\.role: /);
    assert.ok(err.cause instanceof z.ZodError, 'the zod error is kept as the cause');
  });

  it('names a nested path', () => {
    const err = thrown(() =>
      defineScope(AgentScope).parse({ userId: 'u1', orgId: 'o1', role: 'admin', user: { name: 'a', tags: ['x', 3] } }),
    );
    assert.match(err.message, /^scope\.user\.tags\.1: /);
  });

  it('a root-level schema error names the scope itself', () => {
    const err = thrown(() => defineScope(AgentScope).parse('not an object'));
    assert.ok(isTroupeError(err, 'ERR_INVALID_ARGUMENT'));
    assert.match(err.message, /^scope: /);
  });

  it('deep-freezes the parsed scope', () => {
    const scope = defineScope(AgentScope).parse({
      userId: 'u1',
      orgId: 'o1',
      role: 'member',
      user: { name: 'Ada', tags: ['a'] },
    });
    assert.ok(Object.isFrozen(scope));
    const user = scope.user;
    assert.ok(user !== undefined);
    assert.ok(Object.isFrozen(user));
    assert.ok(Object.isFrozen(user.tags));
    assert.throws(() => {
      (user.tags as string[]).push('b');
    }, TypeError);
  });

  it('refuses a bad budget option', () => {
    for (const budgetBytes of [0, -1, 1.5, Number.NaN]) {
      const err = thrown(() => defineScope(AgentScope, { budgetBytes }));
      assert.ok(isTroupeError(err, 'ERR_INVALID_ARGUMENT'), String(budgetBytes));
      assert.match(err.message, /budgetBytes must be a positive integer/);
    }
  });
});

describe('scope budget', () => {
  const Loose = z.object({ userId: z.string(), blob: z.string() });

  it('a scope over the default 4 KiB budget fails with the size and says to project a lean scope', () => {
    const def = defineScope(Loose);
    const err = thrown(() => def.parse({ userId: 'u1', blob: 'x'.repeat(5000) }));
    assert.ok(err instanceof InvalidArgumentError);
    assert.ok(isTroupeError(err, 'ERR_SCOPE_OVER_BUDGET'));
    assert.match(err.message, /^scope is 4\.9 KiB \(\d+ bytes\), over the 4 KiB budget/);
    assert.match(err.message, /lean projection/);
  });

  it('a scope just under the budget passes', () => {
    const def = defineScope(Loose);
    const scope = def.parse({ userId: 'u1', blob: 'x'.repeat(3900) });
    assert.ok(serializedSize(scope) <= 4096);
  });

  it('the budget is configurable', () => {
    const small = defineScope(Loose, { budgetBytes: 64 });
    const err = thrown(() => small.parse({ userId: 'u1', blob: 'x'.repeat(100) }));
    assert.ok(isTroupeError(err, 'ERR_SCOPE_OVER_BUDGET'));
    assert.match(err.message, /over the 64 B budget/);
    const large = defineScope(Loose, { budgetBytes: 64 * 1024 });
    assert.equal(large.parse({ userId: 'u1', blob: 'x'.repeat(10_000) }).blob.length, 10_000);
  });

  it('sealScope takes the budget too', () => {
    assert.throws(() => sealScope({ blob: 'x'.repeat(200) }, 100), { code: 'ERR_SCOPE_OVER_BUDGET' });
    assert.equal(sealScope({ blob: 'x' }, 100).blob, 'x');
  });
});

describe('serializedSize', () => {
  it('measures the structured-clone bytes and grows with the value', () => {
    const small = serializedSize({ a: 'x' });
    const large = serializedSize({ a: 'x'.repeat(1000) });
    assert.ok(small > 0);
    assert.ok(large - small >= 999);
    assert.ok(serializedSize(42) > 0);
  });

  it('remembers the size of a sealed scope', () => {
    const scope = sealScope({ userId: 'u1' });
    const size = serializedSize(scope);
    assert.equal(serializedSize(scope), size);
  });

  it('never serves a stale size for a shallowly frozen value whose insides changed', () => {
    const inner = { list: [] as string[] };
    const value = Object.freeze({ inner });
    const before = serializedSize(value);
    inner.list.push('x'.repeat(10_000));
    assert.ok(serializedSize(value) > before + 9_000);
  });
});

describe('isDeepFrozen: what can never change, so what is derived from it may be kept', () => {
  it('holds for plain objects, arrays and primitives frozen all the way down, by deepFreeze or sealScope', () => {
    assert.equal(isDeepFrozen(deepFreeze({ a: { b: [1, { c: 'x' }] } })), true);
    assert.equal(isDeepFrozen(sealScope({ userId: 'u1', teams: ['t1', 't2'], profile: { tz: 'UTC' } })), true);
    assert.equal(isDeepFrozen(deepFreeze(Object.assign(Object.create(null), { a: 1 }))), true);
    assert.equal(isDeepFrozen('a string'), true);
    assert.equal(isDeepFrozen(undefined), true);
  });

  it('does not hold for a value frozen at the top only, or never frozen', () => {
    assert.equal(isDeepFrozen(Object.freeze({ inner: { n: 1 } })), false);
    assert.equal(isDeepFrozen({ n: 1 }), false);
  });

  it('does not hold for anything that still changes once frozen, however deep', () => {
    const changeable: [string, () => unknown][] = [
      ['Map', () => new Map([['k', 1]])],
      ['Set', () => new Set([1])],
      ['Date (setTime)', () => new Date(0)],
      ['RegExp (compile)', () => /a/],
      ['typed array', () => new Uint8Array(2)],
      ['ArrayBuffer', () => new ArrayBuffer(2)],
    ];
    for (const [what, make] of changeable) {
      assert.equal(isDeepFrozen(deepFreeze({ deep: [{ value: make() }] })), false, `deepFreeze, ${what}`);
      assert.equal(isDeepFrozen(sealScope({ deep: [{ value: make() }] })), false, `sealScope, ${what}`);
    }
    // Shared memory: deepFreeze takes it and does not call it sealed; a scope refuses it.
    assert.equal(isDeepFrozen(deepFreeze({ deep: [{ value: new SharedArrayBuffer(2) }] })), false);
    assert.throws(
      () => sealScope({ deep: [{ value: new SharedArrayBuffer(2) }] }),
      (e) => isTroupeError(e, 'ERR_NOT_CLONEABLE'),
    );
    // The case that mattered: a frozen Date still moves, so a kept copy would go stale.
    const date = deepFreeze({ when: new Date(0) }).when as Date;
    date.setTime(5);
    assert.equal(date.getTime(), 5);
  });
});

describe('cloneableSizeBound: the size of JSON-like data without serializing it', () => {
  // Plain objects (some with a null prototype), arrays (some with holes), every primitive V8
  // writes differently (one- and two-byte strings, Smis, doubles, bigints, undefined), shared
  // objects and cycles; frozen or not, since V8 writes a frozen array sparse.
  const leaf = fc.oneof(
    fc.string({ unit: 'binary' }),
    fc.string(),
    fc.integer(),
    fc.double(),
    fc.bigInt(),
    fc.boolean(),
    fc.constant(null),
    fc.constant(undefined),
  );
  const { tree } = fc.letrec<{ tree: unknown }>((tie) => ({
    tree: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      leaf,
      fc.array(tie('tree'), { maxLength: 6 }),
      fc.sparseArray(tie('tree'), { maxLength: 8 }),
      fc
        .tuple(
          fc.array(tie('tree'), { maxLength: 4 }),
          fc.dictionary(fc.string({ minLength: 1 }), tie('tree'), { maxKeys: 3 }),
        )
        .map(([items, extra]) => {
          // An array with named properties too (non-index keys only; an assignment to `__proto__`
          // would set the array's prototype instead, which a scope refuses: not what this generates).
          for (const [k, v] of Object.entries(extra))
            if (!/^\d+$/.test(k) && k !== 'length' && k !== '__proto__')
              (items as unknown as Record<string, unknown>)[k] = v;
          return items;
        }),
      fc.dictionary(fc.string({ unit: 'binary' }), tie('tree'), { maxKeys: 6 }),
      fc.dictionary(fc.string(), tie('tree'), { maxKeys: 4, noNullPrototype: false }),
    ),
  }));

  it('is never below what v8.serialize writes (property, frozen and not, shared objects and cycles)', () => {
    fc.assert(
      fc.property(tree, fc.boolean(), fc.boolean(), (data, share, freeze) => {
        let value: unknown = data;
        if (share && typeof data === 'object' && data !== null) {
          const cyc: Record<string, unknown> = { a: data, b: data };
          cyc.self = cyc;
          value = cyc;
        }
        if (freeze) deepFreeze(value);
        const bound = cloneableSizeBound(value);
        assert.ok(Number.isFinite(bound));
        assert.ok(bound >= serialize(value).byteLength, `bound ${bound} < ${serialize(value).byteLength}`);
      }),
      { numRuns: 1000 },
    );
  });

  it('is -1 for what cannot cross, Infinity for built-ins only a serialization measures', () => {
    assert.equal(cloneableSizeBound({ f: () => 1 }), -1);
    assert.equal(cloneableSizeBound([Symbol('s')]), -1);
    assert.equal(cloneableSizeBound({ d: new Date(0) }), Number.POSITIVE_INFINITY);
    assert.equal(cloneableSizeBound({ m: new Map([[1, 2]]) }), Number.POSITIVE_INFINITY);
    assert.equal(cloneableSizeBound({ u8: new Uint8Array(4) }), Number.POSITIVE_INFINITY);
    assert.ok(cloneableSizeBound('abc') >= serialize('abc').byteLength);
  });

  it('counts what structured clone writes beyond an array’s elements: named properties and holes', () => {
    const tags: string[] & { blob?: string } = ['a', 'b'];
    tags.blob = 'x'.repeat(100_000);
    assert.ok(cloneableSizeBound({ tags }) >= serialize({ tags }).byteLength);
    const holey: unknown[] = [];
    holey[5] = 'x'.repeat(50);
    (holey as unknown as Record<string, unknown>).note = 'y'.repeat(70);
    assert.ok(cloneableSizeBound(holey) >= serialize(holey).byteLength);
    assert.throws(
      () => sealScope({ userId: 'u1', tags }, 4096),
      (e) => isTroupeError(e, 'ERR_SCOPE_OVER_BUDGET'),
      'an array property must not hide 100 KB from the budget',
    );
  });

  it('walks a sparse array by its keys, not its length (a[2 ** 31] does not loop 2 ** 31 times)', () => {
    const sparse: number[] = [];
    sparse[2 ** 31] = 1;
    assert.equal(isCloneable({ sparse }), true);
    assert.ok(cloneableSizeBound({ sparse }) >= serialize({ sparse }).byteLength);
    assert.equal(sealScope({ sparse }).sparse[2 ** 31], 1);
  });

  it('sealScope decides the budget on the exact size when the bound is over it', () => {
    // Two-byte strings are bounded at 2 bytes per unit: a one-byte string near the budget is over
    // its bound but within the budget.
    const near = { note: 'x'.repeat(3000) };
    assert.ok(cloneableSizeBound(near) > 4096 && serialize(near).byteLength <= 4096);
    const sealed = sealScope(near, 4096);
    assert.equal(serializedSizeAtMost(sealed), serializedSize(sealed), 'measured exactly, so known exactly');
    assert.throws(
      () => sealScope({ note: 'x'.repeat(5000) }, 4096),
      (e) => isTroupeError(e, 'ERR_SCOPE_OVER_BUDGET') && /\(50\d\d bytes\)/.test((e as Error).message),
    );
  });

  it('a lean scope sealed on its bound is still refused by a smaller budget later', () => {
    const scope = sealScope({ userId: 'u1', notes: 'x'.repeat(600) }, 4096);
    assert.ok(serializedSizeAtMost(scope) <= 4096);
    assert.ok(serializedSizeAtMost(scope) >= serializedSize(scope));
    assert.throws(
      () => sealScope(scope, 300),
      (e) => isTroupeError(e, 'ERR_SCOPE_OVER_BUDGET'),
    );
    assert.equal(sealScope(scope, 700), scope, 'within a budget between its size and its bound');
  });
});

describe('deepFreeze', () => {
  it('freezes everything reachable, including inside Maps, Sets and cycles', () => {
    const cyc: { self?: unknown; list: { n: number }[] } = { list: [{ n: 1 }] };
    cyc.self = cyc;
    const value = deepFreeze({ cyc, map: new Map([['k', { v: 1 }]]), set: new Set([{ w: 2 }]) });
    assert.ok(Object.isFrozen(value.cyc.list[0]));
    assert.ok(Object.isFrozen(value.map.get('k')));
    assert.ok(Object.isFrozen([...value.set][0]));
  });

  it('descends into a value that is frozen only at the top', () => {
    const value = deepFreeze(Object.freeze({ inner: { n: 1 } }));
    assert.ok(Object.isFrozen(value.inner), 'a shallow freeze must not stop the deep one');
  });

  it('sealScope deep-freezes a scope frozen only at the top', () => {
    const scope = sealScope(Object.freeze({ user: { id: 'u1' } }));
    assert.ok(Object.isFrozen(scope.user));
  });
});

describe('assertCloneable: the path of the first bad value', () => {
  class User {
    readonly id = 'u1';
    #secret = 's';
    save(): string {
      return this.#secret;
    }
  }

  const cases: [string, unknown, RegExp][] = [
    ['a function', { user: { id: 'u1', save() {} } }, /^scope\.user\.save is a function \(save\)/],
    ['a symbol', { user: { tag: Symbol('t') } }, /^scope\.user\.tag is a symbol \(t\)/],
    ['a class instance', { user: new User() }, /^scope\.user is an instance of User/],
    ['inside an array', { list: [1, 2, () => 3] }, /^scope\.list\[2\] is a function/],
    ['an odd key', { 'a-b': { fn: Math.max } }, /^scope\["a-b"\]\.fn is a function \(max\)/],
    ['a Map value', { m: new Map([['k', () => 1]]) }, /^scope\.m\.get\("k"\) is a function/],
    ['a Set item', { s: new Set([Symbol('x')]) }, /^scope\.s\.<item 0> is a symbol/],
    ['a promise', { p: Promise.resolve(1) }, /^scope\.p is an instance of Promise/],
    [
      'an Array subclass',
      { list: new (class Roles extends Array<string> {})() },
      /^scope\.list is an instance of Roles/,
    ],
    ['an error', { e: new Error('x') }, /^scope\.e is an instance of Error/],
    ['a symbol-keyed property', { [Symbol('k')]: 1 }, /^scope\[Symbol\(k\)\] is a symbol-keyed property/],
  ];
  for (const [what, value, message] of cases) {
    it(`refuses ${what}`, () => {
      assert.equal(isCloneable(value), false, 'the path-free check must refuse it too');
      const err = thrown(() => assertCloneable(value, 'scope'));
      assert.ok(err instanceof InvalidArgumentError);
      assert.ok(isTroupeError(err, 'ERR_NOT_CLONEABLE'));
      assert.match(err.message, message);
      assert.match(err.message, /pass plain data/);
    });
  }

  it('names the first bad value only', () => {
    assert.deepEqual(findUncloneable({ a: 1, b: () => 1, c: Symbol('c') }, 'scope'), {
      path: 'scope.b',
      what: 'a function (b)',
    });
  });

  it('accepts plain data, the data built-ins and cycles', () => {
    const cyc: Record<string, unknown> = { a: 1 };
    cyc.self = cyc;
    const ok = {
      n: 1,
      s: 's',
      b: true,
      nil: null,
      u: undefined,
      big: 10n,
      d: new Date(0),
      r: /x/g,
      m: new Map([['k', { v: [1] }]]),
      set: new Set([1, 'a']),
      buf: new ArrayBuffer(4),
      u8: new Uint8Array(2),
      f64: new Float64Array(2),
      dv: new DataView(new ArrayBuffer(2)),
      bare: Object.create(null) as object,
      cyc,
    };
    assert.equal(findUncloneable(ok), undefined);
    assert.equal(isCloneable(ok), true);
    assert.doesNotThrow(() => assertCloneable(ok));
    assert.doesNotThrow(() => structuredClone(ok));
  });

  it('a bad value anywhere in plain data is refused at its path (property)', () => {
    // Plain data (JSON-like, shared subtrees allowed) with one bad value put at a random path.
    const bads: [unknown, RegExp][] = [
      [() => 1, /^a function/],
      [Symbol('s'), /^a symbol/],
      [new (class Widget {})(), /^an instance of Widget/],
      [new WeakMap(), /^an instance of WeakMap/],
    ];
    fc.assert(
      fc.property(fc.jsonValue(), fc.array(fc.nat()), fc.nat(bads.length - 1), (data, route, which) => {
        const root = { data: structuredClone(data) as unknown };
        // Walk the route into containers; put the bad value under a fresh key or index there.
        let path = 'scope.data';
        let next: unknown = root.data;
        for (const step of route) {
          if (Array.isArray(next) && next.length > 0) {
            const i = step % next.length;
            if (typeof next[i] !== 'object' || next[i] === null) break;
            path += `[${i}]`;
            next = next[i];
          } else if (typeof next === 'object' && next !== null && Object.keys(next).length > 0) {
            const keys = Object.keys(next);
            const k = keys[step % keys.length] as string;
            const v = (next as Record<string, unknown>)[k];
            if (typeof v !== 'object' || v === null) break;
            path += /^[A-Za-z_$][\w$]*$/.test(k) ? `.${k}` : `[${JSON.stringify(k)}]`;
            next = v;
          } else break;
        }
        assert.equal(isCloneable(root), true);
        const [bad, what] = bads[which] as [unknown, RegExp];
        let badPath: string;
        if (typeof next === 'object' && next !== null) {
          if (Array.isArray(next)) {
            next.push(bad);
            badPath = `${path}[${next.length - 1}]`;
          } else {
            (next as Record<string, unknown>).zz_bad = bad;
            badPath = `${path}.zz_bad`;
          }
        } else {
          root.data = bad;
          badPath = 'scope.data';
        }
        assert.equal(isCloneable(root), false);
        const found = findUncloneable(root, 'scope');
        assert.ok(found !== undefined);
        assert.match(found.what, what);
        // The first bad value in walk order: the only one there is, so its path.
        assert.equal(found.path, badPath);
      }),
      { numRuns: 500 },
    );
  });

  it('refuses what structured clone refuses beyond array elements, and proxies, naming the path', () => {
    const fnArr: number[] & { fn?: () => number } = [1, 2];
    fnArr.fn = () => 1;
    const err = thrown(() => sealScope({ user: { fnArr } }));
    assert.ok(isTroupeError(err, 'ERR_NOT_CLONEABLE'));
    assert.match(err.message, /^scope\.user\.fnArr\.fn is a function/);
    const proxied = thrown(() => sealScope({ user: new Proxy({ id: 'u1' }, {}) }));
    assert.ok(isTroupeError(proxied, 'ERR_NOT_CLONEABLE'));
    assert.match(proxied.message, /^scope\.user is a Proxy/);
    assert.equal(isCloneable([new Proxy([], {})]), false);
  });

  it('sealScope refuses a scope whose getter answers differently on a second read; nothing is frozen', () => {
    let reads = 0;
    const inner = { role: 'member' };
    const scope = {
      inner,
      get g(): unknown {
        return reads++ === 0 ? () => 1 : 'ok';
      },
    };
    const err = thrown(() => sealScope(scope));
    assert.ok(isTroupeError(err, 'ERR_NOT_CLONEABLE'));
    assert.match(err.message, /getter/);
    assert.equal(Object.isFrozen(inner), false);
    assert.equal(Object.isFrozen(scope), false);
  });

  it('sealScope leaves a refused scope as it was (nothing frozen)', () => {
    const scope = { user: { id: 'u1', teams: [{ id: 't1' }] }, save() {} };
    assert.throws(
      () => sealScope(scope),
      (e) => isTroupeError(e, 'ERR_NOT_CLONEABLE'),
    );
    assert.equal(Object.isFrozen(scope), false);
    assert.equal(Object.isFrozen(scope.user), false);
    assert.equal(Object.isFrozen(scope.user.teams[0]), false);
  });

  it('sealScope refuses an uncloneable scope before measuring it', () => {
    const err = thrown(() => sealScope({ user: { id: 'u1', save() {} } }));
    assert.ok(isTroupeError(err, 'ERR_NOT_CLONEABLE'));
    assert.match(err.message, /^scope\.user\.save is a function/);
  });

  it('defineScope refuses a function kept by a permissive schema', () => {
    const Permissive = z.object({ user: z.object({ id: z.string() }).passthrough() });
    const err = thrown(() => defineScope(Permissive).parse({ user: { id: 'u1', save() {} } }));
    assert.ok(isTroupeError(err, 'ERR_NOT_CLONEABLE'));
    assert.match(err.message, /^scope\.user\.save is a function/);
  });
});

describe('freezeReceived: a fresh copy frozen without a visited set', () => {
  it('freezes a structured-cloned graph all the way down, cycles and shared objects included', () => {
    const shared = { id: 's' };
    const cyc: Record<string, unknown> = { shared, list: [shared, { deep: { n: [1, 2] } }] };
    cyc.self = cyc;
    const value = { cyc, map: new Map([[{ k: 1 }, { v: [1] }]]), set: new Set([{ w: 2 }]), u8: new Uint8Array(2) };
    const copy = freezeReceived(structuredClone(value));
    assert.ok(Object.isFrozen(copy));
    assert.ok(Object.isFrozen(copy.cyc.shared));
    assert.equal(copy.cyc.self, copy.cyc);
    const deep = (copy.cyc.list as { deep?: { n: number[] } }[])[1]?.deep;
    assert.ok(deep !== undefined && Object.isFrozen(deep) && Object.isFrozen(deep.n));
    const entry = [...copy.map][0];
    assert.ok(entry !== undefined);
    assert.ok(Object.isFrozen(entry[0]) && Object.isFrozen(entry[1]) && Object.isFrozen(entry[1].v));
    assert.ok(Object.isFrozen([...copy.set][0]));
    // Typed arrays cannot be frozen: left as they are, not a throw.
    assert.equal(Object.isFrozen(copy.u8), false);
  });

  it('reaches what an array holds under named properties, and walks a sparse array by its keys', () => {
    const tagged: unknown[] & { meta?: { n: number } } = [{ a: 1 }];
    tagged.meta = { n: 1 };
    const sparse: { k: number }[] = [];
    sparse[2 ** 31] = { k: 1 };
    const copy = freezeReceived(structuredClone({ tagged, sparse }));
    assert.ok(Object.isFrozen((copy.tagged as unknown as { meta: object }).meta), 'an object under a named array key');
    assert.ok(Object.isFrozen(copy.sparse[2 ** 31]));
  });

  it('passes primitives through', () => {
    assert.equal(freezeReceived(42), 42);
    assert.equal(freezeReceived(null), null);
  });
});

describe('sealScope: a scope sealed once', () => {
  it('is returned as is, still checked against the budget it is sealed for now', () => {
    const scope = sealScope({ userId: 'u1', notes: 'x'.repeat(600) }, 4096);
    assert.equal(sealScope(scope, 4096), scope);
    assert.throws(
      () => sealScope(scope, 256),
      (e) => isTroupeError(e, 'ERR_SCOPE_OVER_BUDGET'),
    );
  });
});
