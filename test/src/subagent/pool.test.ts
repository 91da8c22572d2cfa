import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  type AgentId,
  CancelledError,
  isTroupeError,
  slotRunCancellation,
  ToolTimeoutError,
  TroupeError,
  WorkerCrashedError,
} from '@troupe/core';
import { SubagentPool } from '@troupe/supervisor';
import { afterWakeups } from '../fixtures/afterWakeups.js';

const basic = new URL('../fixtures/agents/basic.js', import.meta.url).href;
const crashy = new URL('../fixtures/agents/crashy.js', import.meta.url).href;
const cancellable = new URL('../fixtures/agents/cancellable.js', import.meta.url).href;
const scope = Object.freeze({ userId: 'u1', orgId: 'o1', role: 'admin' });
const ref = (module: string, name: string) => ({ module, name });

/** A pool whose budget lets a 20 KiB scope through (the default 4 KiB refuses it). */
function createHeavyPool(): SubagentPool {
  return new SubagentPool({ threads: 2, scopeBudgetBytes: 64 * 1024 });
}

/** Start a run and resolve `started` when its first tool begins (the worker's telemetry event). */
function runUntilToolStarts(pool: SubagentPool, spec: Parameters<SubagentPool['run']>[0]) {
  let signalStarted: () => void = () => {};
  const started = new Promise<void>((resolve) => {
    signalStarted = resolve;
  });
  const outcome = pool.run({
    ...spec,
    telemetry: true,
    host: { telemetry: (e) => (e.event === 'tool.execute.start' ? signalStarted() : undefined) },
  });
  return { outcome, started };
}

describe('SubagentPool', () => {
  let pool: SubagentPool;
  before(async () => {
    pool = new SubagentPool({ threads: 2, graceMs: 100 });
    await pool.ready();
  });
  after(() => pool.destroy());

  it('is warm: every thread is started before the first run', () => {
    assert.equal(pool.stats().threads, 2);
  });

  it('runs an agent module to `done` with its answer, turns and events', async () => {
    const outcome = await pool.run({ agent: ref(basic, 'echo'), input: 'hello', scope });
    assert.equal(outcome.status, 'done');
    assert.equal(outcome.status === 'done' && outcome.result, 'echo: hello');
    assert.equal(outcome.status === 'done' && outcome.turns, 1);
  });

  it('gives the child the three channels, fresh messages and todos, and lets internal keys win', async () => {
    const outcome = await pool.run({
      agent: ref(basic, 'contextProbe'),
      agentId: 'agent_p-sub-1' as AgentId,
      parentAgentId: 'agent_p' as AgentId,
      input: 'probe',
      scope,
      toolContext: { featureFlags: { beta: true }, requestId: 'req-9', state: 'caller state', agentId: 'caller id' },
      metadata: { title: 'Chat' },
    });
    assert.equal(outcome.status, 'done');
    if (outcome.status !== 'done') return;
    const seen = JSON.parse(outcome.result);
    assert.deepEqual(seen.scope, scope);
    assert.deepEqual(seen.flat, { featureFlags: { beta: true }, requestId: 'req-9' });
    assert.deepEqual(seen.toolContext.featureFlags, { beta: true });
    assert.deepEqual(seen.metadata, { title: 'Chat' });
    assert.equal(seen.agentId, 'agent_p-sub-1');
    assert.equal(seen.stateAgentId, 'agent_p-sub-1');
    assert.equal(seen.parentAgentId, 'agent_p');
    assert.deepEqual(seen.messages, ['system', 'user', 'assistant']);
    assert.equal(seen.todos, 0);
    // The child's metadata changes come back as operations (for an optional merge-back) and its events with its id.
    assert.deepEqual(
      outcome.updates.map((o) => o.op),
      ['set', 'append'],
    );
    assert.deepEqual(
      outcome.events.map((e) => [e.type, e.agentId]),
      [['noted', 'agent_p-sub-1']],
    );
  });

  it('carries a heavy scope as shared bytes, decoded once per worker, the same to every tool', async () => {
    const heavy = createHeavyPool();
    try {
      await heavy.ready();
      const scope = {
        userId: 'u1',
        audit: Array.from({ length: 600 }, (_, i) => ({ at: i, what: `event ${i}`, ok: i % 2 === 0 })),
      };
      const outcomes = await Promise.all(
        Array.from({ length: 6 }, () => heavy.run({ agent: ref(basic, 'contextProbe'), input: 'probe', scope })),
      );
      for (const outcome of outcomes) {
        assert.equal(outcome.status, 'done');
        const seen = JSON.parse(outcome.status === 'done' ? outcome.result : '{}');
        assert.deepEqual(seen.scope, JSON.parse(JSON.stringify(scope)));
      }
    } finally {
      await heavy.destroy();
    }
  });

  describe('a scope that cannot change is kept per worker; one that can is sent afresh', () => {
    // One thread: every run lands on the worker that saw the previous one.
    let single: SubagentPool;
    before(async () => {
      single = new SubagentPool({ threads: 1, scopeBudgetBytes: 64 * 1024 });
      await single.ready();
    });
    after(() => single.destroy());

    const look = async (scope: unknown): Promise<{ same: boolean; frozen: boolean; tag: string }> => {
      const outcome = await single.run({ agent: ref(basic, 'scopeIdentity'), input: 'look', scope });
      assert.equal(outcome.status, 'done');
      return JSON.parse(outcome.status === 'done' ? outcome.result : '{}');
    };
    const padding = Array.from({ length: 600 }, (_, i) => ({ at: i, what: `event ${i}` }));

    for (const [kind, extra] of [
      ['lean', {}],
      ['heavy (shared bytes)', { padding }],
    ] as const) {
      it(`${kind}: every run of the same sealed scope sees one frozen object, another scope another`, async () => {
        const scope = { tag: 'a', ...extra };
        await look(scope);
        assert.deepEqual(await look(scope), { same: true, frozen: true, tag: 'a' });
        assert.deepEqual(await look(scope), { same: true, frozen: true, tag: 'a' });
        // Equal content, another object: another version, another copy.
        assert.deepEqual(await look({ tag: 'a', ...extra }), { same: false, frozen: true, tag: 'a' });
      });

      it(`${kind}: a scope holding a Map is never kept: a change to the Map between runs is seen`, async () => {
        const tags = new Map([['tag', 'v1']]);
        const scope = { tags, ...extra };
        assert.equal((await look(scope)).tag, 'v1');
        // A frozen Map still changes; the next run must carry what the scope holds now.
        tags.set('tag', 'v2');
        assert.deepEqual(await look(scope), { same: false, frozen: true, tag: 'v2' });
      });

      it(`${kind}: a scope holding a Date is never kept: a change to the frozen Date between runs is seen`, async () => {
        const when = new Date(0);
        const scope = { when, ...extra };
        assert.equal((await look(scope)).tag, '0');
        when.setTime(5_000); // Object.freeze does not stop setTime
        assert.deepEqual(await look(scope), { same: false, frozen: true, tag: '5000' });
      });
    }
  });

  it('turns malformed tool calls and bad arguments into error results the model sees', async () => {
    const outcome = await pool.run({ agent: ref(basic, 'sloppy'), input: 'x', scope });
    assert.equal(outcome.status, 'done');
    assert.deepEqual(JSON.parse(outcome.status === 'done' ? outcome.result : '[]'), [
      'error',
      'error',
      'error',
      'error',
      3,
    ]);
  });

  it('ends `incomplete` at the turn limit', async () => {
    const outcome = await pool.run({ agent: ref(basic, 'looper'), input: 'x', scope });
    assert.equal(outcome.status, 'incomplete');
    assert.equal(outcome.status === 'incomplete' && outcome.turns, 3);
  });

  it('reports a model error as `failed`, rebuilt as the same error class with its code', async () => {
    const outcome = await pool.run({ agent: ref(basic, 'brokenModel'), input: 'x', scope });
    assert.equal(outcome.status, 'failed');
    if (outcome.status !== 'failed') return;
    assert.ok(outcome.error instanceof TroupeError);
    assert.ok(isTroupeError(outcome.error, 'ERR_MODEL'));
    assert.match(outcome.error.message, /provider is down/);
  });

  it('cancels a CPU-bound tool that polls isCancelled(): cooperative, not forced', async () => {
    const agentId = 'agent_poll' as AgentId;
    const run = runUntilToolStarts(pool, { agent: ref(cancellable, 'poller'), agentId, input: 'x', scope });
    await run.started;
    assert.equal(pool.cancel(agentId, 'user'), true);
    const outcome = await run.outcome;
    assert.equal(outcome.status, 'cancelled');
    assert.deepEqual(outcome.status === 'cancelled' && [outcome.reason, outcome.forced], ['user', false]);
  });

  it('wakes a tool awaiting its signal', async () => {
    const agentId = 'agent_wait' as AgentId;
    const run = runUntilToolStarts(pool, { agent: ref(cancellable, 'waiter'), agentId, input: 'x', scope });
    await run.started;
    pool.cancel(agentId, 'shutdown');
    const outcome = await run.outcome;
    assert.deepEqual(outcome.status === 'cancelled' && [outcome.reason, outcome.forced], ['shutdown', false]);
  });

  it('kills a run that ignores its cancel after the grace period: `cancelled`, forced', async () => {
    const agentId = 'agent_stubborn' as AgentId;
    const run = runUntilToolStarts(pool, { agent: ref(cancellable, 'stubborn'), agentId, input: 'x', scope });
    await run.started;
    pool.cancel(agentId, 'user');
    const outcome = await run.outcome;
    assert.deepEqual(
      outcome.status === 'cancelled' && [outcome.reason, outcome.forced],
      ['user', true],
      JSON.stringify(outcome),
    );
    // The pool is whole again: a run still works.
    assert.equal((await pool.run({ agent: ref(basic, 'echo'), input: 'after', scope })).status, 'done');
  });

  it('enforces a tool timeout against code that never yields: a terminal, forced ToolTimeoutError', async () => {
    const outcome = await pool.run({ agent: ref(cancellable, 'spinner'), input: 'x', scope });
    assert.equal(outcome.status, 'failed');
    if (outcome.status !== 'failed') return;
    assert.ok(outcome.error instanceof ToolTimeoutError);
    assert.equal((outcome.error as ToolTimeoutError).forced, true);
    assert.equal((await pool.run({ agent: ref(basic, 'echo'), input: 'after', scope })).status, 'done');
  });

  it('a polite CPU-bound tool past its timeout is cancelled alone: the run goes on', async () => {
    const outcome = await pool.run({ agent: ref(cancellable, 'politeTimeout'), input: 'x', scope });
    assert.equal(outcome.status, 'done');
    assert.match(outcome.status === 'done' ? outcome.result : '', /after timeout: .*ERR_TOOL_TIMEOUT/);
  });

  it('a run deadline cancels the run with reason `deadline`', async () => {
    const outcome = await pool.run({ agent: ref(cancellable, 'poller'), input: 'x', scope, timeoutMs: 20 });
    assert.deepEqual(outcome.status === 'cancelled' && [outcome.reason, outcome.forced], ['deadline', false]);
  });

  it('cancel is a no-op (false) for an unknown or finished run, and never reaches another run', async () => {
    assert.equal(pool.cancel('agent_nobody' as AgentId), false);
    const done = await pool.run({ agent: ref(basic, 'echo'), agentId: 'agent_done' as AgentId, input: 'x', scope });
    assert.equal(done.status, 'done');
    assert.equal(pool.cancel('agent_done' as AgentId), false);
    const a = runUntilToolStarts(pool, {
      agent: ref(cancellable, 'poller'),
      agentId: 'agent_a' as AgentId,
      input: 'x',
      scope,
    });
    const b = pool.run({ agent: ref(basic, 'echo'), agentId: 'agent_b' as AgentId, input: 'y', scope });
    await a.started;
    pool.cancel('agent_a' as AgentId);
    assert.equal((await a.outcome).status, 'cancelled');
    assert.equal((await b).status, 'done');
  });
});

describe('SubagentPool crash containment', () => {
  it('reports every way a worker dies as `crashed` with its exit code, and keeps serving', async () => {
    const pool = new SubagentPool({ threads: 2, resourceLimits: { maxOldGenerationSizeMb: 64 } });
    try {
      const [thrown, exited, oom, neighbour] = await Promise.all([
        pool.run({ agent: ref(crashy, 'thrower'), input: 'x', scope }),
        pool.run({ agent: ref(crashy, 'exiter'), input: 'x', scope }),
        pool.run({ agent: ref(crashy, 'hog'), input: 'x', scope }),
        pool.run({ agent: ref(basic, 'echo'), input: 'neighbour', scope }),
      ]);
      for (const o of [thrown, exited, oom]) {
        assert.equal(o.status, 'crashed');
        assert.ok(o.status === 'crashed' && o.error instanceof WorkerCrashedError);
      }
      assert.equal(exited.status === 'crashed' && exited.exitCode, 3);
      assert.match(oom.status === 'crashed' ? oom.error.message : '', /memory/);
      assert.equal(neighbour.status, 'done');
      assert.equal((await pool.run({ agent: ref(basic, 'echo'), input: 'x', scope })).status, 'done');
    } finally {
      await pool.destroy();
    }
  });

  it('100 crashes in a row leave the pool serving normally', async () => {
    const pool = new SubagentPool({ threads: 2 });
    try {
      for (let i = 0; i < 100; i++) {
        const o = await pool.run({ agent: ref(crashy, 'exiter'), input: 'x', scope });
        assert.equal(o.status, 'crashed');
      }
      const outcomes = await Promise.all(
        Array.from({ length: 10 }, (_, i) => pool.run({ agent: ref(basic, 'echo'), input: `ok ${i}`, scope })),
      );
      assert.deepEqual(
        outcomes.map((o) => o.status === 'done' && o.result),
        Array.from({ length: 10 }, (_, i) => `echo: ok ${i}`),
      );
      assert.equal(pool.stats().threads, 2);
      assert.equal(pool.stats().tableSize, 0);
    } finally {
      await pool.destroy();
    }
  });
});

describe('SubagentPool bad input', () => {
  let pool: SubagentPool;
  before(async () => {
    pool = new SubagentPool({ threads: 1, maxQueue: 1, scopeBudgetBytes: 256 });
    await pool.ready();
  });
  after(() => pool.destroy());

  it('validates options at construction', () => {
    assert.throws(
      () => new SubagentPool({ threads: 0 }),
      (e) => isTroupeError(e, 'ERR_INVALID_ARGUMENT') && /threads/.test((e as Error).message),
    );
    assert.throws(() => new SubagentPool({ maxQueue: -1 }), /maxQueue/);
    assert.throws(() => new SubagentPool({ graceMs: Number.NaN }), /graceMs/);
    assert.throws(() => new SubagentPool({ bogus: 1 } as never), /bogus|Unrecognized/i);
  });

  it('refuses an unknown module or a module without the agent, before posting', async () => {
    const before = pool.stats().completed;
    await assert.rejects(pool.run({ agent: ref('file:///nowhere/agent.js', 'x'), input: 'x', scope }), (e) =>
      isTroupeError(e, 'ERR_UNKNOWN_AGENT'),
    );
    await assert.rejects(
      pool.run({ agent: ref(basic, 'nothing'), input: 'x', scope }),
      (e) => isTroupeError(e, 'ERR_UNKNOWN_AGENT') && /exports no agent named "nothing"/.test((e as Error).message),
    );
    assert.equal(pool.stats().completed, before);
  });

  it('refuses a scope over budget or not cloneable, naming the size or the path, before posting', async () => {
    const before = pool.stats().completed;
    await assert.rejects(
      pool.run({ agent: ref(basic, 'echo'), input: 'x', scope: { blob: 'x'.repeat(1000) } }),
      (e) => isTroupeError(e, 'ERR_SCOPE_OVER_BUDGET') && /over the 256 B budget/.test((e as Error).message),
    );
    await assert.rejects(
      pool.run({ agent: ref(basic, 'echo'), input: 'x', scope: { user: { save() {} } } }),
      (e) => isTroupeError(e, 'ERR_NOT_CLONEABLE') && /scope\.user\.save/.test((e as Error).message),
    );
    await assert.rejects(
      pool.run({ agent: ref(basic, 'echo'), input: 'x', scope, toolContext: { db: new Map([[1, () => 1]]) } }),
      (e) => isTroupeError(e, 'ERR_NOT_CLONEABLE') && /toolContext\.db/.test((e as Error).message),
    );
    assert.equal(pool.stats().completed, before);
  });

  it('bounds the queue with a typed backpressure error', async () => {
    const holder = runUntilToolStarts(pool, {
      agent: ref(cancellable, 'waiter'),
      agentId: 'agent_h1' as AgentId,
      input: 'x',
      scope,
    });
    await holder.started;
    // The one thread is busy, and a run whose module is loaded is posted synchronously: it queues at once.
    const queued = pool.run({ agent: ref(cancellable, 'waiter'), agentId: 'agent_h2' as AgentId, input: 'x', scope });
    assert.equal(pool.stats().queued, 1);
    await assert.rejects(pool.run({ agent: ref(basic, 'echo'), input: 'x', scope }), (e) =>
      isTroupeError(e, 'ERR_BACKPRESSURE'),
    );
    pool.cancel('agent_h2' as AgentId);
    pool.cancel('agent_h1' as AgentId);
    assert.equal((await holder.outcome).status, 'cancelled');
    assert.equal((await queued).status, 'cancelled');
  });

  it('refuses a run after close with a ClosedError', async () => {
    const closing = new SubagentPool({ threads: 1 });
    await closing.close();
    await assert.rejects(closing.run({ agent: ref(basic, 'echo'), input: 'x', scope }), (e) =>
      isTroupeError(e, 'ERR_CLOSED'),
    );
    // close() and destroy() are idempotent.
    await closing.close();
    await closing.destroy();
  });

  for (const end of ['close', 'destroy'] as const) {
    it(`${end}() lets this thread's idle signal bridge go (it would hold the buffer until the next cancel)`, async () => {
      const pool = new SubagentPool({ threads: 1 });
      await pool.ready();
      // A bridged run on this thread, as a parent agent's async tool makes one.
      const run = slotRunCancellation(pool.table.buffer, pool.table.register('parent'));
      void run.token.signal;
      run.close();
      pool.table.release('parent');
      await afterWakeups();
      const bell = pool.table.slots.doorbell;
      await pool[end]();
      await afterWakeups();
      assert.equal(Atomics.notify(bell, 0), 0);
    });
  }
});

void CancelledError;
