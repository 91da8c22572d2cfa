import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Worker } from 'node:worker_threads';
import {
  type Agent,
  defineAgent,
  isTroupeError,
  ToolTimeoutError,
  TroupeError,
  WorkerCrashedError,
} from '@troupe/core';
import { slotRunCancellation, WORKER_READY } from '@troupe/core/internal';
import { ScriptedModel } from '@troupe/core/testing';
import { createSupervisor, type SpawnOptions, type Supervisor } from '@troupe/supervisor';
import { RunTree } from '@troupe/supervisor/internal';
import { EventEmitter } from 'eventemitter3';
import { afterWakeups } from '../fixtures/afterWakeups.js';
import { brokenModel, contextProbe, echo, looper, scopeIdentity, sloppy } from '../fixtures/agents/basic.js';
import { politeTimeout, poller, spinner, stubborn, waiter } from '../fixtures/agents/cancellable.js';
import { exiter, hog, thrower } from '../fixtures/agents/crashy.js';
import { newGate, parker, release } from '../fixtures/agents/lifecycle.js';
import { byDepth } from '../fixtures/testDepth.js';

const basic = new URL('../fixtures/agents/basic.js', import.meta.url).href;
const scope = Object.freeze({ userId: 'u1', orgId: 'o1', role: 'admin' });

/**
 * Start a direct spawn and resolve `started` with its agent id when its first
 * tool begins (the worker's telemetry event); `abort` cancels it (reason user).
 */
function spawnUntilToolStarts(supervisor: Supervisor, agent: Agent, options: Partial<SpawnOptions> = {}) {
  const controller = new AbortController();
  let agentId: string | undefined;
  const started = new Promise<string>((resolve) => {
    const onStart = (e: { agentId: string }) => {
      if (agentId !== undefined && e.agentId !== agentId) return;
      supervisor.off('tool.execute.start', onStart);
      resolve(e.agentId);
    };
    supervisor.on('tool.execute.start', onStart);
  });
  const onSpawned = (e: { agentId: string; agent: string }) => {
    if (e.agent !== agent.name || agentId !== undefined) return;
    agentId = e.agentId;
    supervisor.off('subagent.spawned', onSpawned);
  };
  supervisor.on('subagent.spawned', onSpawned);
  const outcome = supervisor.spawn(agent, { input: 'x', scope, signal: controller.signal, ...options });
  return { outcome, started, abort: () => controller.abort() };
}

// A supervisor of its own for a test that kills or parks threads, destroyed after it.
async function onFreshPool(threads: number, test: (supervisor: Supervisor) => Promise<void>): Promise<void> {
  const supervisor = createSupervisor({ pool: { threads }, persistence: null });
  try {
    await supervisor.ready();
    await test(supervisor);
  } finally {
    await supervisor.destroy();
  }
}

describe('Supervisor.spawn: a subagent run on the pool', () => {
  let supervisor: Supervisor;
  before(async () => {
    // The grace is what a cooperative cancel may take before the worker is killed: long enough for a
    // polling tool to see it on a busy machine (the tests of a forced kill wait it out once each).
    supervisor = createSupervisor({ pool: { threads: 2, graceMs: 1000 }, persistence: null });
    await supervisor.ready();
  });
  after(() => supervisor.destroy());

  it('is warm: every thread has booted (loaded the subagent runtime) when ready() resolves, before the first run', async () => {
    // Observed from outside the pool: every Worker this process starts (process 'worker'), and
    // the boot signal each posts once the runtime is loaded. A count of the pool's threads would
    // hold as soon as they are constructed, booted or not.
    const started: Worker[] = [];
    const booted = new Set<number>();
    const onWorker = (worker: Worker) => {
      started.push(worker);
      worker.on('message', (message: unknown) => {
        if (
          typeof message === 'object' &&
          message !== null &&
          (message as Record<string, unknown>)[WORKER_READY] === true
        ) {
          booted.add(worker.threadId);
        }
      });
    };
    process.on('worker', onWorker);
    const fresh = createSupervisor({ pool: { threads: 2 }, persistence: null });
    try {
      await fresh.ready();
      const bootedAtReady = [...booted].sort();
      assert.equal(started.length, 2, 'the pool started its two threads');
      assert.deepEqual(bootedAtReady, started.map((w) => w.threadId).sort(), 'each had booted when ready() resolved');
      const placed: (number | undefined)[] = [];
      fresh.on('subagent.done', (e) => placed.push(e.threadId));
      await Promise.all([fresh.spawn(echo, { input: 'a', scope }), fresh.spawn(echo, { input: 'b', scope })]);
      assert.equal(placed.length, 2);
      for (const thread of placed)
        assert.ok(thread !== undefined && bootedAtReady.includes(thread), `run on thread ${thread}`);
      assert.equal(started.length, 2, 'the runs started no thread');
    } finally {
      process.off('worker', onWorker);
      await fresh.destroy();
    }
  });

  it('runs an agent module to `done` with its answer, turns and events', async () => {
    const outcome = await supervisor.spawn(echo, { input: 'hello', scope });
    assert.equal(outcome.status, 'done');
    assert.equal(outcome.status === 'done' && outcome.result, 'echo: hello');
    assert.equal(outcome.status === 'done' && outcome.turns, 1);
  });

  it('gives the child the three channels, fresh messages and todos, and lets internal keys win', async () => {
    const outcome = await supervisor.spawn(contextProbe, {
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
    assert.equal(seen.agentId, outcome.agentId);
    assert.equal(seen.stateAgentId, outcome.agentId);
    assert.equal(seen.parentAgentId, null);
    assert.deepEqual(seen.messages, ['system', 'user', 'assistant']);
    assert.equal(seen.todos, 0);
    // The child's metadata changes come back as operations (for an optional merge-back) and its events with its id.
    assert.deepEqual(
      outcome.updates.map((o) => o.op),
      ['set', 'append'],
    );
    assert.deepEqual(
      outcome.events.map((e) => [e.type, e.agentId]),
      [['noted', outcome.agentId]],
    );
  });

  it('carries a heavy scope as shared bytes, decoded once per worker, the same to every tool', async () => {
    const heavy = createSupervisor({ pool: { threads: 2 }, persistence: null, scopeBudgetBytes: 64 * 1024 });
    try {
      await heavy.ready();
      const scope = {
        userId: 'u1',
        audit: Array.from({ length: 600 }, (_, i) => ({ at: i, what: `event ${i}`, ok: i % 2 === 0 })),
      };
      const outcomes = await Promise.all(
        Array.from({ length: 6 }, () => heavy.spawn(contextProbe, { input: 'probe', scope })),
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
    let single: Supervisor;
    before(async () => {
      single = createSupervisor({ pool: { threads: 1 }, persistence: null, scopeBudgetBytes: 64 * 1024 });
      await single.ready();
    });
    after(() => single.destroy());

    const look = async (scope: unknown): Promise<{ same: boolean; frozen: boolean; tag: string }> => {
      const outcome = await single.spawn(scopeIdentity, { input: 'look', scope });
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
    const outcome = await supervisor.spawn(sloppy, { input: 'x', scope });
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
    const outcome = await supervisor.spawn(looper, { input: 'x', scope });
    assert.equal(outcome.status, 'incomplete');
    assert.equal(outcome.status === 'incomplete' && outcome.turns, 3);
  });

  it('reports a model error as `failed`, rebuilt as the same error class with its code', async () => {
    const outcome = await supervisor.spawn(brokenModel, { input: 'x', scope });
    assert.equal(outcome.status, 'failed');
    if (outcome.status !== 'failed') return;
    assert.ok(outcome.error instanceof TroupeError);
    assert.ok(isTroupeError(outcome.error, 'ERR_MODEL'));
    assert.match(outcome.error.message, /provider is down/);
  });

  it('cancels a CPU-bound tool that polls isCancelled(): cooperative, not forced', async () => {
    const run = spawnUntilToolStarts(supervisor, poller);
    const agentId = await run.started;
    assert.equal(supervisor.cancel(agentId, 'user'), true);
    const outcome = await run.outcome;
    assert.equal(outcome.status, 'cancelled');
    assert.deepEqual(outcome.status === 'cancelled' && [outcome.reason, outcome.forced], ['user', false]);
  });

  it('wakes a tool awaiting its signal', async () => {
    const run = spawnUntilToolStarts(supervisor, waiter);
    const agentId = await run.started;
    supervisor.cancel(agentId, 'shutdown');
    const outcome = await run.outcome;
    assert.deepEqual(outcome.status === 'cancelled' && [outcome.reason, outcome.forced], ['shutdown', false]);
  });

  it('an aborted signal cancels the spawn (reason user)', async () => {
    const run = spawnUntilToolStarts(supervisor, waiter);
    await run.started;
    run.abort();
    const outcome = await run.outcome;
    assert.deepEqual(outcome.status === 'cancelled' && [outcome.reason, outcome.forced], ['user', false]);
  });

  it('kills a run that ignores its cancel after the grace period: `cancelled`, forced', async () => {
    const run = spawnUntilToolStarts(supervisor, stubborn);
    const agentId = await run.started;
    supervisor.cancel(agentId, 'user');
    const outcome = await run.outcome;
    assert.deepEqual(
      outcome.status === 'cancelled' && [outcome.reason, outcome.forced],
      ['user', true],
      JSON.stringify(outcome),
    );
    // The pool is whole again: a run still works.
    assert.equal((await supervisor.spawn(echo, { input: 'after', scope })).status, 'done');
  });

  it('enforces a tool timeout against code that never yields: a terminal, forced ToolTimeoutError', async () => {
    const outcome = await supervisor.spawn(spinner, { input: 'x', scope });
    assert.equal(outcome.status, 'failed');
    if (outcome.status !== 'failed') return;
    assert.ok(outcome.error instanceof ToolTimeoutError);
    assert.equal((outcome.error as ToolTimeoutError).forced, true);
    assert.equal((await supervisor.spawn(echo, { input: 'after', scope })).status, 'done');
  });

  it('a polite CPU-bound tool past its timeout is cancelled alone: the run goes on', async () => {
    const outcome = await supervisor.spawn(politeTimeout, { input: 'x', scope });
    assert.equal(outcome.status, 'done');
    assert.match(outcome.status === 'done' ? outcome.result : '', /after timeout: .*ERR_TOOL_TIMEOUT/);
  });

  it('a run deadline cancels the run with reason `deadline`', async () => {
    const outcome = await supervisor.spawn(poller, { input: 'x', scope, timeoutMs: 20 });
    assert.deepEqual(outcome.status === 'cancelled' && [outcome.reason, outcome.forced], ['deadline', false]);
  });

  it('cancel is a no-op (false) for an unknown or finished run, and never reaches another run', async () => {
    assert.equal(supervisor.cancel('agent_nobody'), false);
    const done = await supervisor.spawn(echo, { input: 'x', scope });
    assert.equal(done.status, 'done');
    assert.equal(supervisor.cancel(done.agentId), false);
    const a = spawnUntilToolStarts(supervisor, poller);
    const b = supervisor.spawn(echo, { input: 'y', scope });
    const agentId = await a.started;
    supervisor.cancel(agentId);
    assert.equal((await a.outcome).status, 'cancelled');
    assert.equal((await b).status, 'done');
  });
});

describe('Supervisor.spawn: crash containment', () => {
  it('reports every way a worker dies as `crashed` with its exit code, and keeps serving', async () => {
    const supervisor = createSupervisor({
      pool: { threads: 2, resourceLimits: { maxOldGenerationSizeMb: 64 } },
      persistence: null,
    });
    try {
      const [thrown, exited, oom, neighbour] = await Promise.all([
        supervisor.spawn(thrower, { input: 'x', scope }),
        supervisor.spawn(exiter, { input: 'x', scope }),
        supervisor.spawn(hog, { input: 'x', scope }),
        supervisor.spawn(echo, { input: 'neighbour', scope }),
      ]);
      for (const o of [thrown, exited, oom]) {
        assert.equal(o.status, 'crashed', JSON.stringify(o));
        assert.ok(o.status === 'crashed' && o.error instanceof WorkerCrashedError);
      }
      assert.equal(exited.status === 'crashed' && exited.exitCode, 3);
      assert.match(oom.status === 'crashed' ? oom.error.message : '', /memory/);
      assert.equal(neighbour.status, 'done');
      assert.equal((await supervisor.spawn(echo, { input: 'x', scope })).status, 'done');
    } finally {
      await supervisor.destroy();
    }
  });

  it('a run that waits for the only thread while it is replaced starts on the new thread with its own slot', async () => {
    // One thread: when it dies, the next run is posted before piscina has a
    // thread ready, so piscina queues it and hands it to the balancer later
    // (the dispatch moment the run learns its thread and slot in).
    await onFreshPool(1, async (supervisor) => {
      for (let i = 0; i < 5; i++) {
        const [crashed, next, after] = await Promise.all([
          supervisor.spawn(exiter, { input: 'x', scope }),
          supervisor.spawn(echo, { input: `after crash ${i}`, scope }),
          supervisor.spawn(echo, { input: `then ${i}`, scope }),
        ]);
        assert.equal(crashed.status, 'crashed');
        assert.equal(next.status === 'done' && next.result, `echo: after crash ${i}`, JSON.stringify(next));
        assert.equal(after.status === 'done' && after.result, `echo: then ${i}`, JSON.stringify(after));
      }
      assert.equal(supervisor.stats().pool.tableSize, 0);
    });
  });

  it('never dispatches to a busy thread, before and after the other thread is replaced', async () => {
    // The balancer reads each thread's state through piscina's per-thread
    // interface, which the pool keeps (one object per thread): what it reads
    // must be live, or a run would be sent to the thread a parked run holds.
    await onFreshPool(2, async (supervisor) => {
      const threads = new Map<string, number | undefined>();
      supervisor.on('subagent.done', (e) => threads.set(e.agentId, e.threadId));
      const gate = newGate();
      const started = new Promise<void>((resolve) => {
        supervisor.once('tool.execute.start', () => resolve());
      });
      const parked = supervisor.spawn(parker, { input: 'park', scope, toolContext: { gate } });
      await started;
      const ids: string[] = [];
      const crashedAt = 10;
      for (let i = 0; i < 20; i++) {
        if (i === crashedAt) {
          // The free thread dies and is replaced: the runs after it go to the new thread.
          assert.equal((await supervisor.spawn(exiter, { input: 'x', scope })).status, 'crashed');
        }
        const o = await supervisor.spawn(echo, { input: `run ${i}`, scope });
        assert.equal(o.status, 'done', JSON.stringify(o));
        ids.push(o.agentId);
      }
      release(gate);
      const p = await parked;
      assert.equal(p.status, 'done', JSON.stringify(p));
      const parkedOn = threads.get(p.agentId);
      assert.notEqual(parkedOn, undefined);
      const used = ids.map((id) => threads.get(id));
      assert.ok(!used.includes(parkedOn), `a run went to the parked run's thread ${parkedOn}: ${used.join(', ')}`);
      // Two threads served the echoes: the first one, and its replacement after the crash.
      assert.equal(new Set(used.slice(0, crashedAt)).size, 1);
      assert.equal(new Set(used.slice(crashedAt)).size, 1);
      assert.notEqual(used[0], used[crashedAt]);
    });
  });

  const crashes = byDepth({ quick: 15, deep: 100 });
  it(`${crashes} crashes in a row leave the pool serving normally`, async () => {
    const supervisor = createSupervisor({ pool: { threads: 2 }, persistence: null });
    try {
      for (let i = 0; i < crashes; i++) {
        const o = await supervisor.spawn(exiter, { input: 'x', scope });
        assert.equal(o.status, 'crashed');
      }
      const outcomes = await Promise.all(
        Array.from({ length: 10 }, (_, i) => supervisor.spawn(echo, { input: `ok ${i}`, scope })),
      );
      assert.deepEqual(
        outcomes.map((o) => o.status === 'done' && o.result),
        Array.from({ length: 10 }, (_, i) => `echo: ok ${i}`),
      );
      const stats = supervisor.stats();
      assert.equal(stats.pool.threads, 2);
      assert.equal(stats.pool.tableSize, 0);
      assert.equal(stats.runs, 0);
    } finally {
      await supervisor.destroy();
    }
  });
});

describe('Supervisor.spawn: bad input', () => {
  let supervisor: Supervisor;
  before(async () => {
    supervisor = createSupervisor({ pool: { threads: 1, maxQueue: 1 }, scopeBudgetBytes: 256, persistence: null });
    await supervisor.ready();
  });
  after(() => supervisor.destroy());

  it('refuses an unknown module or a module without the agent, before posting', async () => {
    const before = supervisor.stats().pool.completed;
    const model = ScriptedModel.answering('x');
    const nowhere = defineAgent({ name: 'x', module: 'file:///nowhere/agent.js', instructions: '', model });
    await assert.rejects(supervisor.spawn(nowhere, { input: 'x', scope }), (e) =>
      isTroupeError(e, 'ERR_UNKNOWN_AGENT'),
    );
    const missing = defineAgent({ name: 'nothing', module: basic, instructions: '', model });
    await assert.rejects(
      supervisor.spawn(missing, { input: 'x', scope }),
      (e) => isTroupeError(e, 'ERR_UNKNOWN_AGENT') && /exports no agent named "nothing"/.test((e as Error).message),
    );
    const moduleless = defineAgent({ name: 'inline', instructions: '', model });
    await assert.rejects(
      supervisor.spawn(moduleless, { input: 'x', scope }),
      (e) => isTroupeError(e, 'ERR_UNKNOWN_AGENT') && /module: import\.meta\.url/.test((e as Error).message),
    );
    assert.equal(supervisor.stats().pool.completed, before);
  });

  it('refuses a scope over budget or not cloneable, naming the size or the path, before posting', async () => {
    const before = supervisor.stats().pool.completed;
    await assert.rejects(
      supervisor.spawn(echo, { input: 'x', scope: { blob: 'x'.repeat(1000) } }),
      (e) => isTroupeError(e, 'ERR_SCOPE_OVER_BUDGET') && /over the 256 B budget/.test((e as Error).message),
    );
    await assert.rejects(
      supervisor.spawn(echo, { input: 'x', scope: { user: { save() {} } } }),
      (e) => isTroupeError(e, 'ERR_NOT_CLONEABLE') && /scope\.user\.save/.test((e as Error).message),
    );
    await assert.rejects(
      supervisor.spawn(echo, { input: 'x', scope, toolContext: { db: new Map([[1, () => 1]]) } }),
      (e) => isTroupeError(e, 'ERR_NOT_CLONEABLE') && /toolContext\.db/.test((e as Error).message),
    );
    assert.equal(supervisor.stats().pool.completed, before);
  });

  it('an already-aborted signal refuses the spawn before anything is posted', async () => {
    const before = supervisor.stats().pool.completed;
    await assert.rejects(supervisor.spawn(echo, { input: 'x', scope, signal: AbortSignal.abort() }), (e) =>
      isTroupeError(e, 'ERR_CANCELLED'),
    );
    assert.equal(supervisor.stats().pool.completed, before);
    assert.equal(supervisor.stats().runs, 0);
  });

  it('bounds the queue with a typed backpressure error', async () => {
    const holder = spawnUntilToolStarts(supervisor, waiter);
    const h1 = await holder.started;
    // The one thread is busy: the next spawn queues.
    const queued = spawnUntilToolStarts(supervisor, waiter);
    while (supervisor.stats().pool.queued === 0) await new Promise((r) => setImmediate(r));
    await assert.rejects(supervisor.spawn(echo, { input: 'x', scope }), (e) => isTroupeError(e, 'ERR_BACKPRESSURE'));
    queued.abort();
    supervisor.cancel(h1);
    assert.equal((await holder.outcome).status, 'cancelled');
    assert.equal((await queued.outcome).status, 'cancelled');
  });

  it('refuses a spawn after close with a ClosedError; close and destroy are idempotent', async () => {
    const closing = createSupervisor({ pool: { threads: 1 }, persistence: null });
    await closing.close();
    await assert.rejects(closing.spawn(echo, { input: 'x', scope }), (e) => isTroupeError(e, 'ERR_CLOSED'));
    await closing.close();
    await closing.destroy();
  });

  for (const end of ['close', 'destroy'] as const) {
    it(`${end} lets this thread's idle signal bridge go (it would hold the buffer until the next cancel)`, async () => {
      const { systemClock, localTransport } = await import('@troupe/supervisor');
      const tree = new RunTree({
        clock: systemClock,
        events: new EventEmitter(),
        approval: undefined,
        transport: localTransport({ threads: 1, maxQueue: 8, graceMs: 100 }),
        subagentTimeoutMs: undefined,
        deadlineIntervalMs: 10,
      });
      await tree.transport.ready();
      // A bridged run on this thread, as a parent agent's async tool makes one.
      const table = tree.local.table;
      const run = slotRunCancellation(table.slots, table.register('parent'));
      void run.token.signal;
      run.close();
      table.release('parent');
      await afterWakeups();
      const bell = table.slots.doorbell;
      await (end === 'close' ? tree.closeTransport(100) : tree.destroyTransport());
      await afterWakeups();
      assert.equal(Atomics.notify(bell, 0), 0);
    });
  }
});
