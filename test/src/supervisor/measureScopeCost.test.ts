import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { serialize } from 'node:v8';
import { deepFreeze, isTroupeError } from '@troupe/core';
import { createSupervisor, MAX_MEASURED_HOPS, measureScopeCost } from '@troupe/supervisor';
import { echo } from '../fixtures/agents/basic.js';

const lean = { userId: 'u1', orgId: 'o1', role: 'admin' };

/** What a value weighs sealed (deep-frozen), as a spawn carries it. */
const sealedSize = (value: unknown): number => serialize(deepFreeze(structuredClone(value))).byteLength;

/** A scope whose heaviest key is `auditEvents`, over the default 4 KiB budget. */
function heavyScope() {
  const auditEvents: { id: string; action: string; note: string }[] = [];
  for (let i = 0; i < 120; i++) auditEvents.push({ id: `evt_${i}`, action: 'login', note: 'x'.repeat(40) });
  return { user: { id: 'u1', email: 'a@example.com', role: 'admin' }, preferences: { theme: 'dark' }, auditEvents };
}

describe('measureScopeCost (issue 6)', () => {
  it('measures real spawns over 1 and 2 hops: size, budget, per-hop time, clone baseline, raw runs', async () => {
    for (const hops of [1, 2]) {
      const cost = await measureScopeCost(lean, { hops, samples: 3, warmup: 1 });
      assert.equal(cost.hops, hops);
      assert.equal(cost.bytes, serialize(lean).byteLength);
      assert.equal(cost.budgetBytes, 4096);
      assert.equal(cost.overBudget, false);
      assert.equal(cost.runsUs.length, 3);
      assert.equal(cost.mainThreadUs.length, 3);
      assert.ok(cost.perHopUs.median > 0 && cost.perHopUs.p95 >= cost.perHopUs.median);
      assert.ok(cost.mainThreadPerHopUs.median >= 0);
      assert.ok(cost.cloneUs > 0);
      // The per-hop figure is the run divided by its hops.
      const perHop = [...cost.runsUs].map((us) => us / hops).sort((a, b) => a - b);
      assert.equal(cost.perHopUs.median, perHop[1]);
    }
    assert.equal(Object.isFrozen(lean), false, 'the caller’s scope is never frozen: the runs carry a copy');
    const scope = heavyScope();
    await measureScopeCost(scope, { samples: 1, warmup: 0 });
    assert.equal(Object.isFrozen(scope.auditEvents), false);
  });

  it('reports a scope over the budget and the top-level keys that weigh most, heaviest first', async () => {
    const scope = heavyScope();
    const cost = await measureScopeCost(scope, { samples: 2, warmup: 0 });
    assert.equal(cost.bytes, sealedSize(scope), 'the size of what crosses: the sealed scope');
    assert.ok(cost.bytes > 4096);
    assert.equal(cost.overBudget, true, 'measured anyway: the private supervisor admits it');
    assert.deepEqual(
      cost.keys.map((k) => k.key),
      ['auditEvents', 'user', 'preferences'],
    );
    for (const k of cost.keys) assert.equal(k.bytes, sealedSize(scope[k.key as keyof typeof scope]));
    assert.ok(Math.abs(cost.keys.reduce((sum, k) => sum + k.share, 0) - 1) < 0.01);
    const within = await measureScopeCost(scope, { samples: 1, warmup: 0, budgetBytes: 1 << 20 });
    assert.equal(within.overBudget, false);
    assert.equal(within.budgetBytes, 1 << 20);
  });

  it('carries a JSON scope faithfully, "__proto__" key included; non-object scopes have no keys', async () => {
    const scope = JSON.parse('{"__proto__": {"polluted": true}, "userId": "u1"}') as Record<string, unknown>;
    const cost = await measureScopeCost(scope, { samples: 1, warmup: 0 });
    assert.equal(cost.bytes, serialize(scope).byteLength);
    assert.deepEqual(cost.keys.map((k) => k.key).sort(), ['__proto__', 'userId']);
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
    const scalar = await measureScopeCost('u1', { samples: 1, warmup: 0 });
    assert.deepEqual(scalar.keys, []);
  });

  it('rejects a scope that cannot cross a thread, naming the path, before any worker starts', async () => {
    const scope = { user: { id: 'u1', save() {} } };
    const pending = measureScopeCost(scope);
    assert.ok(pending instanceof Promise, 'rejects, never throws synchronously');
    await assert.rejects(pending, (e) => isTroupeError(e, 'ERR_NOT_CLONEABLE') && /scope\.user\.save/.test(e.message));
  });

  it('validates its options with errors that say what is allowed', async () => {
    for (const bad of [
      { hops: 0 },
      { hops: MAX_MEASURED_HOPS + 1 },
      { hops: 1.5 },
      { samples: 0 },
      { warmup: -1 },
      { newScopeSamples: -1 },
      { newScopeSamples: 0.5 },
      { budgetBytes: 0 },
      { signal: 'stop' },
      { supervisor: {} },
      { extra: true },
    ]) {
      await assert.rejects(
        measureScopeCost(lean, bad as never),
        (e) => isTroupeError(e, 'ERR_INVALID_ARGUMENT') && /hops 1\.\.8/.test((e as Error).message),
        JSON.stringify(bad),
      );
    }
  });

  it('times runs that each carry a scope object never seen before, on request; the caller keeps an unfrozen scope', async () => {
    const scope = heavyScope();
    const cost = await measureScopeCost(scope, { samples: 2, warmup: 0, newScopeSamples: 3, budgetBytes: 1 << 20 });
    assert.equal(cost.newScopeRunsUs.length, 3);
    assert.ok(cost.newScopeRunUs !== undefined);
    assert.equal(cost.newScopeRunUs.median, [...cost.newScopeRunsUs].sort((a, b) => a - b)[1]);
    assert.equal(Object.isFrozen(scope), false);
    assert.equal(Object.isFrozen(scope.auditEvents[0]), false);
    const none = await measureScopeCost(lean, { samples: 1, warmup: 0, newScopeSamples: 0 });
    assert.equal(none.newScopeRunUs, undefined);
    assert.deepEqual(none.newScopeRunsUs, []);
  });

  it('carries arrays with holes and named properties through real hops (a sparse array of length 2 ** 31 too)', async () => {
    const sparse: number[] = [];
    sparse[2 ** 31] = 7;
    const tagged: string[] & { note?: string } = ['a'];
    tagged.note = 'kept';
    const scope = { userId: 'u1', sparse, tagged };
    const cost = await measureScopeCost(scope, { samples: 2, warmup: 0, newScopeSamples: 1 });
    assert.equal(cost.bytes, sealedSize(scope));
    assert.equal(cost.runsUs.length, 2);
    assert.equal(cost.newScopeRunsUs.length, 1);
    assert.equal(Object.isFrozen(sparse), false, 'the caller’s arrays are copied, not frozen');
  });

  it('runs on a given supervisor (which stays open) and refuses one with fewer threads than hops', async () => {
    const supervisor = createSupervisor({ pool: { threads: 2 }, persistence: null });
    try {
      await assert.rejects(
        measureScopeCost(lean, { hops: 3, supervisor }),
        (e) => isTroupeError(e, 'ERR_INVALID_ARGUMENT') && /fewer than hops/.test((e as Error).message),
      );
      const scope = deepFreeze({ ...lean });
      const cost = await measureScopeCost(scope, { hops: 2, samples: 2, warmup: 0, supervisor });
      assert.equal(cost.runsUs.length, 2);
      // A scope over this supervisor's budget is refused by the supervisor itself, with its message.
      await assert.rejects(measureScopeCost(heavyScope(), { samples: 1, warmup: 0, supervisor }), (e) =>
        isTroupeError(e, 'ERR_SCOPE_OVER_BUDGET'),
      );
      assert.equal((await supervisor.spawn(echo, { scope, input: 'still open' })).status, 'done');
    } finally {
      await supervisor.close();
    }
  });
});

describe('measureScopeCost: cancellation, four ways', () => {
  it('already aborted: rejects with the signal’s reason', async () => {
    const reason = new Error('stop now');
    await assert.rejects(measureScopeCost(lean, { signal: AbortSignal.abort(reason) }), (e) => e === reason);
  });

  it('aborted while running: the run in flight is cancelled and the call rejects with the reason', async () => {
    const supervisor = createSupervisor({ pool: { threads: 2 }, persistence: null });
    try {
      const controller = new AbortController();
      const reason = new Error('enough');
      // Abort when the first nested spawn starts: a run is in flight.
      supervisor.once('subagent.spawned', () => controller.abort(reason));
      await assert.rejects(
        measureScopeCost(lean, { hops: 2, samples: 1000, warmup: 0, supervisor, signal: controller.signal }),
        (e) => e === reason,
      );
      assert.equal(controller.signal.aborted, true);
    } finally {
      // Resolves only once every run (the cancelled child included) has ended and the workers exited.
      await supervisor.close();
    }
  });

  it('aborted after completion: no effect on the result', async () => {
    const controller = new AbortController();
    const cost = await measureScopeCost(lean, { samples: 1, warmup: 0, signal: controller.signal });
    controller.abort();
    assert.equal(cost.runsUs.length, 1);
  });

  it('no sharing between calls: aborting one leaves a concurrent one to finish', async () => {
    const a = new AbortController();
    const first = measureScopeCost(lean, { samples: 200, warmup: 0, signal: a.signal });
    const second = measureScopeCost(lean, { samples: 2, warmup: 0, signal: new AbortController().signal });
    a.abort();
    await assert.rejects(first, (e) => (e as Error).name === 'AbortError');
    assert.equal((await second).runsUs.length, 2);
  });
});
