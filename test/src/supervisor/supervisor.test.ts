import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type AgentId, isTroupeError, type Request } from '@troupe/core';
import { createSupervisor, type Supervisor, type SupervisorEvents } from '@troupe/supervisor';
import { brokenModel, echo } from '../fixtures/agents/basic.js';
import { poller, stubborn, waiter } from '../fixtures/agents/cancellable.js';
import { exiter } from '../fixtures/agents/crashy.js';
import { admin, deployer, expiring, lead, twoQuestions } from '../fixtures/agents/hitl.js';
import { coordinator, fanOut } from '../fixtures/agents/nested.js';

const scope = Object.freeze({ userId: 'u1', orgId: 'o1', role: 'admin' });

/** Collect every event of the given names, in order. */
function record<K extends keyof SupervisorEvents>(supervisor: Supervisor, ...names: K[]) {
  const seen: { name: K; payload: SupervisorEvents[K][0] }[] = [];
  for (const name of names) {
    supervisor.on(
      name as keyof SupervisorEvents,
      ((payload: SupervisorEvents[K][0]) => seen.push({ name, payload })) as never,
    );
  }
  return seen;
}

/** Resolve with the next emission of an event. */
function next<K extends keyof SupervisorEvents>(supervisor: Supervisor, name: K): Promise<SupervisorEvents[K][0]> {
  return new Promise((resolve) =>
    supervisor.once(name as keyof SupervisorEvents, ((p: SupervisorEvents[K][0]) => resolve(p)) as never),
  );
}

/** A reply without its token counts (asserted where a test is about them). */
function bare<T extends { usage?: unknown; totalUsage?: unknown }>(reply: T): Omit<T, 'usage' | 'totalUsage'> {
  const { usage: _usage, totalUsage: _total, ...rest } = reply;
  return rest;
}

function runsCounter(): Int32Array {
  return new Int32Array(new SharedArrayBuffer(16));
}

// createSupervisor's options, one test per rule: options.test.ts.

describe('Supervisor: parent agents, delegation, propagation', () => {
  let supervisor: Supervisor;
  before(async () => {
    supervisor = createSupervisor({ pool: { threads: 2, graceMs: 100 } });
    await supervisor.pool.ready();
  });
  after(() => supervisor.destroy());

  it('delegates through two levels: every child sees the three channels; ids derive from the parent', async () => {
    const events = record(supervisor, 'subagent.spawned', 'subagent.done', 'agent.started');
    const ref = await supervisor.startAgent(coordinator, {
      scope,
      toolContext: { featureFlags: { beta: true }, requestId: 'req-7', scope: 'not the scope', agentId: 'not the id' },
      metadata: { title: 'Incident review' },
    });
    const reply = await ref.send('review');
    assert.equal(reply.status, 'done');
    if (reply.status !== 'done') return;
    const [middleAnswer, probeAnswer] = JSON.parse(reply.text) as [string, string];
    const leafSaw = JSON.parse(middleAnswer);
    // Level 3 (leaf, spawned by middle in a worker, through the supervisor):
    assert.deepEqual(leafSaw.scope, scope);
    assert.deepEqual(leafSaw.featureFlags, { beta: true });
    assert.equal(leafSaw.toolContext.requestId, 'req-7');
    assert.deepEqual(leafSaw.metadata, { title: 'Incident review' });
    assert.equal(leafSaw.agentId, `${ref.id}-sub-1-sub-1`);
    assert.equal(leafSaw.parentAgentId, `${ref.id}-sub-1`);
    assert.equal(leafSaw.messages, 3, 'a child starts with a fresh transcript: system, user, its own turn');
    // Level 2 (contextProbe): internal keys win over the toolContext keys that name them.
    const probeSaw = JSON.parse(probeAnswer);
    assert.deepEqual(probeSaw.scope, scope);
    assert.equal(probeSaw.agentId, `${ref.id}-sub-2`);
    assert.equal(probeSaw.parentAgentId, ref.id);
    assert.deepEqual(probeSaw.flat, { featureFlags: { beta: true }, requestId: 'req-7' });
    // Metadata flows back only from the subagent the parent asked to merge (contextProbe), through the reducer.
    const snapshot = ref.snapshot();
    assert.deepEqual(snapshot.metadata, {
      title: 'Incident review',
      childNote: 'from-child',
      trail: [`${ref.id}-sub-2`],
    });
    assert.equal('middleMark' in snapshot.metadata, false);
    // The child's session-log events come back with its own id.
    assert.deepEqual(
      snapshot.events.map((e) => [e.type, e.agentId]),
      [['noted', `${ref.id}-sub-2`]],
    );
    // Spawns, not resumes (middle gives its thread up while leaf waits for one, then resumes).
    const spawned = events
      .filter((e) => e.name === 'subagent.spawned')
      .map((e) => e.payload as SupervisorEvents['subagent.spawned'][0])
      .filter((e) => !e.resumed);
    assert.deepEqual(
      spawned.map((s) => s.agentId).sort(),
      [`${ref.id}-sub-1`, `${ref.id}-sub-1-sub-1`, `${ref.id}-sub-2`].sort(),
    );
    for (const s of spawned) {
      assert.ok(s.bytes.scope > 0 && s.bytes.total === s.bytes.scope + s.bytes.toolContext + s.bytes.metadata);
    }
    assert.equal(events.filter((e) => e.name === 'subagent.done').length, 3);
    assert.ok(supervisor.stats().pool.openPorts <= 2, 'at most one host channel per worker thread');
  });

  it('runs several task calls of one turn in parallel and returns their results in call order', async () => {
    const ref = await supervisor.startAgent(fanOut(12, echo), { scope });
    const reply = await ref.send('go');
    assert.deepEqual(bare(reply), { status: 'done', text: '12 done', turns: 2 });
    const tools = ref.snapshot().messages.filter((m) => m.role === 'tool');
    assert.deepEqual(
      tools.map((m) => (m.role === 'tool' ? m.content : null)),
      Array.from({ length: 12 }, (_, i) => `echo: task ${i}`),
    );
  });

  it('processes one message at a time, in order, with a bounded mailbox', async () => {
    const small = createSupervisor({ pool: { threads: 1 }, mailboxSize: 2 });
    try {
      const ref = await small.startAgent(fanOut(1, echo), { scope });
      const order: string[] = [];
      const first = ref.send('one').then((r) => order.push(`1:${r.status}`));
      const second = ref.send('two').then((r) => order.push(`2:${r.status}`));
      const third = ref.send('three').then((r) => order.push(`3:${r.status}`));
      await assert.rejects(ref.send('four'), (e) => isTroupeError(e, 'ERR_BACKPRESSURE'));
      await Promise.all([first, second, third]);
      // The fan-out script has two steps: later messages run past it and fail the model, in order.
      assert.deepEqual(order, ['1:done', '2:failed', '3:failed']);
    } finally {
      await small.destroy();
    }
  });

  it('a crashing child fails its task call; the parent and the pool go on', async () => {
    const crashed = next(supervisor, 'subagent.crashed');
    const ref = await supervisor.startAgent(fanOut(2, exiter), { scope });
    const reply = await ref.send('go');
    assert.deepEqual(bare(reply), { status: 'done', text: '0 done', turns: 2 });
    assert.equal((await crashed).exitCode, 3);
    const again = await (await supervisor.startAgent(fanOut(3, echo), { scope })).send('x');
    assert.equal(again.status === 'done' && again.text, '3 done');
  });

  it('cancelling a parent cancels its running children first; no done follows; workers are freed', async () => {
    const events = record(supervisor, 'subagent.cancelled', 'subagent.done', 'agent.cancelled');
    const ref = await supervisor.startAgent(fanOut(2, waiter), { scope });
    const spawned = new Promise<void>((resolve) => {
      let n = 0;
      supervisor.on('tool.execute.start', (e) => {
        if (e.toolName === 'wait' && ++n === 2) resolve();
      });
    });
    const replied = ref.send('go');
    await spawned;
    assert.equal(ref.cancel('user'), true);
    const reply = await replied;
    assert.deepEqual(bare(reply), { status: 'cancelled', reason: 'user' });
    const cancelled = events
      .filter((e) => e.name === 'subagent.cancelled')
      .map((e) => e.payload as SupervisorEvents['subagent.cancelled'][0]);
    assert.equal(cancelled.length, 2);
    for (const c of cancelled) assert.equal(c.reason, 'parent');
    assert.equal(events.filter((e) => e.name === 'subagent.done').length, 0);
    assert.equal(events.filter((e) => e.name === 'agent.cancelled').length, 1);
    assert.equal(supervisor.stats().pool.running, 0);
    assert.equal(supervisor.stats().pool.tableSize, 0);
    assert.equal(ref.cancel(), false, 'nothing left to cancel');
  });

  it('a child ignoring the cancel is killed after the grace period; the parent still ends cancelled', async () => {
    const forced = next(supervisor, 'subagent.cancelled');
    const started = new Promise<void>((resolve) =>
      supervisor.on('tool.execute.start', (e) => (e.toolName === 'spin' ? resolve() : undefined)),
    );
    const ref = await supervisor.startAgent(fanOut(1, stubborn), { scope });
    const replied = ref.send('go');
    await started;
    ref.cancel('user');
    assert.deepEqual(bare(await replied), { status: 'cancelled', reason: 'user' });
    assert.equal((await forced).forced, true);
  });

  it('restarts a failing parent one-for-one, then stops it after maxRestarts within the period', async () => {
    const strict = createSupervisor({ pool: { threads: 1 }, restart: { maxRestarts: 2, periodMs: 60_000 } });
    try {
      const events = record(strict, 'agent.failed', 'agent.restarted', 'agent.stopped');
      const ref = await strict.startAgent(brokenModel, { scope });
      const r1 = await ref.send('a');
      const r2 = await ref.send('b');
      const r3 = await ref.send('c');
      assert.deepEqual(
        [r1, r2, r3].map((r) => r.status === 'failed' && r.restarted),
        [true, true, false],
      );
      assert.equal(ref.status, 'stopped');
      assert.deepEqual(
        events.map((e) => e.name),
        ['agent.failed', 'agent.restarted', 'agent.failed', 'agent.restarted', 'agent.failed', 'agent.stopped'],
      );
      const failure = events[0]?.payload as SupervisorEvents['agent.failed'][0];
      assert.equal(failure.kind, 'failure');
      await assert.rejects(ref.send('d'), (e) => isTroupeError(e, 'ERR_AGENT_STOPPED'));
    } finally {
      await strict.destroy();
    }
  });
});

describe('Supervisor: trees deeper than the pool', () => {
  it('one thread, three levels, a fan-out and a question: nothing deadlocks — a worker parent waiting on a child gives its thread up', async () => {
    const supervisor = createSupervisor({ pool: { threads: 1 }, persistence: null });
    try {
      const deferred: string[] = [];
      supervisor.on('subagent.spawned', (e) => {
        if (e.resumed) deferred.push(e.agentId);
      });
      // coordinator (this thread) → middle (a worker) → leaf (a worker): middle cannot hold the only thread.
      const ref = await supervisor.startAgent(coordinator, { scope, metadata: { title: 't' } });
      const reply = await ref.send('review');
      assert.equal(reply.status, 'done', JSON.stringify(reply));
      assert.match((reply as { text: string }).text, /-sub-1-sub-1/, 'the leaf answered through middle');
      assert.ok(
        deferred.some((id) => id.endsWith('-sub-1')),
        `middle resumed after its child (${deferred.join(', ')})`,
      );
      // A question two levels down, with one thread: the worker parent waits without a thread, then the question.
      const parent = await supervisor.startAgent(lead, { scope });
      const asked = await parent.send('deploy');
      assert.equal(asked.status, 'suspended');
      assert.equal(supervisor.pool.stats().running, 0, 'no thread is held while a person thinks');
      const done = await supervisor.answer((asked as { request: Request }).request.id, {
        ok: true,
        data: { env: 'prod' },
      });
      assert.equal(done.status, 'done', JSON.stringify(done));
      assert.match((done as { text: string }).text, /deployed api to prod/);
      assert.equal(supervisor.stats().runs, 0);
    } finally {
      await supervisor.destroy();
    }
  });
});

describe('Supervisor: approval', () => {
  it('decides on the supervisor thread: approve, edit, reject, invalid, none', async () => {
    const decisions: unknown[] = [
      { decision: 'approve' },
      { decision: 'edit', arguments: { table: 'sessions' } },
      { decision: 'reject', reason: 'not today' },
      { decision: 'maybe' },
    ];
    const asked: { toolName: string; agentId: string; scope: unknown }[] = [];
    const supervisor = createSupervisor({
      pool: { threads: 1 },
      approval: async (request) => {
        asked.push({
          toolName: request.toolName,
          agentId: request.agentId,
          scope: (request as { scope?: unknown }).scope,
        });
        return decisions.shift() as never;
      },
    });
    try {
      const runs = runsCounter();
      const results: string[] = [];
      for (let i = 0; i < 4; i++) {
        const ref = await supervisor.startAgent(admin, { scope, toolContext: { runs } });
        const reply = await ref.send('drop');
        results.push(reply.status === 'done' ? reply.text : reply.status);
      }
      assert.match(results[0] as string, /dropped users/);
      assert.match(results[1] as string, /dropped sessions/);
      assert.match(results[2] as string, /ERR_APPROVAL_DENIED.*|rejected.*not today/);
      assert.match(results[3] as string, /ERR_APPROVAL_DENIED/);
      assert.equal(Atomics.load(runs, 2), 2, 'only the approved and the edited calls ran');
      assert.deepEqual(asked[0]?.scope, scope);
      // A subagent's call is decided here too, with the subagent's id.
      decisions.push({ decision: 'approve' });
      const parent = await supervisor.startAgent(lead, { scope, toolContext: { runs } });
      const reply = await parent.send('admin please');
      assert.match(reply.status === 'done' ? reply.text : '', /dropped users/);
      assert.equal(asked.at(-1)?.agentId, `${parent.id}-sub-1`);
      assert.equal(Atomics.load(runs, 2), 3);
    } finally {
      await supervisor.destroy();
    }
  });

  it('a pending host call fails promptly when its run is cancelled (no hang, no kill)', async () => {
    let asked: () => void = () => {};
    let handlerSignal: AbortSignal | undefined;
    const handlerCalled = new Promise<void>((resolve) => {
      asked = resolve;
    });
    const supervisor = createSupervisor({
      pool: { threads: 1, graceMs: 10_000 },
      // A person who never answers: the call from the worker stays pending.
      approval: (_request, { signal }) => {
        handlerSignal = signal;
        asked();
        return new Promise(() => {});
      },
    });
    try {
      const cancelled = next(supervisor, 'subagent.cancelled');
      const parent = await supervisor.startAgent(lead, { scope, toolContext: { runs: runsCounter() } });
      const reply = parent.send('admin please');
      await handlerCalled;
      parent.cancel('user');
      assert.deepEqual(bare(await reply), { status: 'cancelled', reason: 'user' });
      // The worker's pending call rejected at once: the run ended on its own, within the 10 s grace.
      assert.equal((await cancelled).forced, false);
      assert.equal(handlerSignal?.aborted, true, 'the handler is told the run is over');
    } finally {
      await supervisor.destroy();
    }
  });

  it('with no handler, a call that needs approval is denied and never runs', async () => {
    const supervisor = createSupervisor({ pool: { threads: 1 } });
    try {
      const runs = runsCounter();
      const parent = await supervisor.startAgent(lead, { scope, toolContext: { runs } });
      const reply = await parent.send('admin please');
      assert.match(reply.status === 'done' ? reply.text : '', /ERR_APPROVAL_DENIED/);
      assert.equal(Atomics.load(runs, 2), 0);
    } finally {
      await supervisor.destroy();
    }
  });

  it('"ask" suspends with a request of kind approval; a yes runs the call once, approved by the supervisor', async () => {
    const supervisor = createSupervisor({
      pool: { threads: 1 },
      approval: async () => ({ decision: 'ask', prompt: 'Drop the users table?' }),
    });
    try {
      const runs = runsCounter();
      const parent = await supervisor.startAgent(lead, { scope, toolContext: { runs } });
      const reply = await parent.send('admin please');
      assert.equal(reply.status, 'suspended');
      if (reply.status !== 'suspended') return;
      assert.equal(reply.request.kind, 'approval');
      assert.equal(Atomics.load(runs, 2), 0);
      const resumed = await supervisor.answer(reply.request.id, { ok: true });
      assert.match(resumed.status === 'done' ? resumed.text : '', /dropped users/);
      assert.equal(Atomics.load(runs, 2), 1);
    } finally {
      await supervisor.destroy();
    }
  });
});

describe('Supervisor: human in the loop', () => {
  let supervisor: Supervisor;
  before(async () => {
    supervisor = createSupervisor({ pool: { threads: 2 } });
    await supervisor.pool.ready();
  });
  after(() => supervisor.destroy());

  it('a suspension in a subagent suspends the parent; the host sees one request with its path; the worker is freed', async () => {
    const opened = record(supervisor, 'request.opened', 'subagent.spawned', 'request.answered');
    const runs = runsCounter();
    const parent = await supervisor.startAgent(lead, { scope, toolContext: { runs } });
    const reply = await parent.send('deploy please');
    assert.equal(reply.status, 'suspended');
    if (reply.status !== 'suspended') return;
    const childId = `${parent.id}-sub-1` as AgentId;
    assert.deepEqual(reply.path, [parent.id, childId]);
    const requests = opened.filter((e) => e.name === 'request.opened');
    assert.equal(requests.length, 1, 'one request reaches the host');
    assert.deepEqual(
      supervisor.pendingRequests().map((p) => [p.request.id, p.agentId, p.path]),
      [[reply.request.id, parent.id, [parent.id, childId]]],
    );
    assert.equal(parent.status, 'suspended');
    assert.equal(supervisor.stats().pool.running, 0, 'nothing runs while a person thinks');
    assert.equal(Atomics.load(runs, 0), 1);

    const done = await supervisor.answer(reply.request.id, { ok: true, data: { env: 'staging' } });
    assert.equal(done.status, 'done');
    assert.match(done.status === 'done' ? done.text : '', /deployed api to staging/);
    assert.equal(Atomics.load(runs, 0), 2, 'the pending tool re-ran exactly once');
    const spawns = opened
      .filter((e) => e.name === 'subagent.spawned')
      .map((e) => e.payload as SupervisorEvents['subagent.spawned'][0]);
    assert.deepEqual(
      spawns.map((s) => [s.agentId, s.resumed]),
      [
        [childId, false],
        [childId, true],
      ],
    );
    assert.equal(supervisor.pendingRequests().length, 0);
    assert.equal(supervisor.stats().suspendedSubagents, 0);

    await assert.rejects(supervisor.answer(reply.request.id, { ok: true }), (e) =>
      isTroupeError(e, 'ERR_REQUEST_ALREADY_ANSWERED'),
    );
    await assert.rejects(supervisor.answer('req_unknown', { ok: true }), (e) =>
      isTroupeError(e, 'ERR_UNKNOWN_REQUEST'),
    );
  });

  it('a malformed answer is refused and leaves the request open; a declined answer becomes an error result', async () => {
    const parent = await supervisor.startAgent(deployer, { scope });
    const reply = await parent.send('deploy');
    assert.equal(reply.status, 'suspended');
    if (reply.status !== 'suspended') return;
    await assert.rejects(supervisor.answer(reply.request.id, { ok: 'yes' } as never), (e) =>
      isTroupeError(e, 'ERR_INVALID_ARGUMENT'),
    );
    await assert.rejects(supervisor.answer(reply.request.id, { ok: true, data: () => 1 } as never), (e) =>
      isTroupeError(e, 'ERR_NOT_CLONEABLE'),
    );
    assert.equal(supervisor.pendingRequests().length, 1);
    const declined = await supervisor.answer(reply.request.id, { ok: false, reason: 'change freeze' });
    assert.equal(declined.status, 'done');
    assert.match(declined.status === 'done' ? declined.text : '', /ERR_REQUEST_DECLINED.*|change freeze/);
  });

  it('an expired request becomes an error result and the run goes on', async () => {
    const parent = await supervisor.startAgent(expiring, { scope });
    const reply = await parent.send('ask');
    assert.equal(reply.status, 'suspended');
    if (reply.status !== 'suspended') return;
    const done = await supervisor.answer(reply.request.id, { ok: true });
    assert.match(done.status === 'done' ? done.text : '', /ERR_REQUEST_EXPIRED/);
  });

  it('two tools suspending in one turn: both questions surface at once; the turn completes once both are answered', async () => {
    const runs = runsCounter();
    const parent = await supervisor.startAgent(twoQuestions, { scope, toolContext: { runs } });
    const requests: Request[] = [];
    const onOpened = (e: { request: Request }) => requests.push(e.request);
    supervisor.on('request.opened', onOpened);
    const first = await parent.send('go');
    assert.equal(first.status === 'suspended' && first.request.prompt, 'Which environment for web?');
    assert.deepEqual(
      requests.map((r) => r.prompt),
      ['Which environment for web?', 'Are you sure?'],
      'each question reaches the host as soon as its tool asks',
    );
    assert.equal(supervisor.pendingRequests().length, 2);
    const second = await supervisor.answer((first as { request: Request }).request.id, {
      ok: true,
      data: { env: 'prod' },
    });
    supervisor.off('request.opened', onOpened);
    assert.equal(second.status === 'suspended' && second.request.prompt, 'Are you sure?');
    assert.equal(requests.length, 2, 'no question is asked twice');
    const done = await supervisor.answer((second as { request: Request }).request.id, {
      ok: true,
      data: { sure: true },
    });
    assert.equal(done.status, 'done');
    assert.deepEqual(JSON.parse(done.status === 'done' ? done.text : '[]'), [
      'deployed web to prod',
      'confirmed: true',
    ]);
    assert.deepEqual([Atomics.load(runs, 0), Atomics.load(runs, 1)], [2, 2]);
  });

  it('cancelling a suspended parent withdraws its request', async () => {
    const parent = await supervisor.startAgent(lead, { scope });
    const reply = await parent.send('deploy');
    assert.equal(reply.status, 'suspended');
    const cancelled = new Promise((resolve) => supervisor.once('agent.cancelled', resolve));
    assert.equal(parent.cancel('user'), true);
    assert.equal(supervisor.pendingRequests().length, 0);
    assert.equal(supervisor.stats().suspendedSubagents, 0);
    // Idle once the cancelled message is saved.
    await cancelled;
    assert.equal(parent.status, 'idle');
    await assert.rejects(supervisor.answer((reply as { request: Request }).request.id, { ok: true }), (e) =>
      isTroupeError(e, 'ERR_UNKNOWN_REQUEST'),
    );
  });
});

describe('Supervisor lifecycle', () => {
  it('close() refuses new work, lets runs finish, resolves after workers exit; idempotent; use after close fails', async () => {
    const supervisor = createSupervisor({ pool: { threads: 2 } });
    const ref = await supervisor.startAgent(fanOut(4, echo), { scope });
    const reply = ref.send('go');
    const closing = supervisor.close({ timeoutMs: 10_000 });
    assert.equal((await reply).status, 'done', 'an in-flight message finishes');
    await closing;
    assert.equal(supervisor.pool.stats().threads, 0);
    await supervisor.close();
    await supervisor.destroy();
    await assert.rejects(ref.send('again'), (e) => isTroupeError(e, 'ERR_CLOSED'));
    await assert.rejects(supervisor.startAgent(echo, { scope }), (e) => isTroupeError(e, 'ERR_CLOSED'));
    await assert.rejects(supervisor.answer('req_x', { ok: true }), (e) => isTroupeError(e, 'ERR_CLOSED'));
  });

  it('close({ timeoutMs }) cancels what is still running at the timeout (shutdown)', async () => {
    const supervisor = createSupervisor({ pool: { threads: 1, graceMs: 50 } });
    const ref = await supervisor.startAgent(fanOut(1, poller), { scope });
    const started = new Promise<void>((resolve) =>
      supervisor.on('tool.execute.start', (e) => (e.toolName === 'poll' ? resolve() : undefined)),
    );
    const reply = ref.send('go');
    await started;
    await supervisor.close({ timeoutMs: 20 });
    assert.deepEqual(bare(await reply), { status: 'cancelled', reason: 'shutdown' });
  });

  it('await using closes the supervisor', async () => {
    let pool: Supervisor['pool'] | undefined;
    {
      await using supervisor = createSupervisor({ pool: { threads: 1 } });
      pool = supervisor.pool;
      const ref = await supervisor.startAgent(echo, { scope });
      assert.equal((await ref.send('hi')).status, 'done');
    }
    assert.equal(pool?.stats().threads, 0);
  });
});
