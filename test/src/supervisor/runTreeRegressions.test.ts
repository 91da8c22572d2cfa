// Regressions: run-tree bugs the property test found (runTree.property.test.ts), one test each,
// with what was wrong and where it was fixed in the comment above it.
import assert from 'node:assert/strict';
import { AsyncLocalStorage } from 'node:async_hooks';
import { describe, it, type TestContext } from 'node:test';
import { isTroupeError } from '@troupe/core';
import { ManualClock } from '@troupe/core/testing';
import { type AgentReply, createSupervisor, type Supervisor, type SupervisorOptions } from '@troupe/supervisor';
import { echo } from '../fixtures/agents/basic.js';
import { lateEvents, telemetryProbe } from '../fixtures/agents/lateEvents.js';
import { type Plan, tree0 } from '../fixtures/agents/tree.js';
import { EventLog } from './EventLog.js';

const scope = Object.freeze({ userId: 'u1' });

/** Keep the process alive for the test (a close() that never resolves then fails by the test's timeout). */
function keepAlive(t: TestContext): void {
  const timer = setInterval(() => {}, 1_000);
  t.after(() => clearInterval(timer));
}

async function open(
  t: TestContext,
  options: SupervisorOptions = {},
): Promise<{ supervisor: Supervisor; log: EventLog }> {
  const supervisor = createSupervisor({ persistence: null, ...options, pool: { threads: 3, ...options.pool } });
  const log = new EventLog(supervisor);
  t.after(() => supervisor.destroy());
  await supervisor.ready();
  return { supervisor, log };
}

const text = (reply: AgentReply): string => (reply.status === 'done' ? reply.text : `(${reply.status})`);

describe('the run tree: regressions found by the property test', () => {
  // Bug 1 — a suspended child that ends while its parent still runs loses its result.
  // P delegates to A (asks) and B (runs until cancelled). A's question is answered while B
  // still runs: A resumes and ends `done`. RunTree#maybeEnd drops A's result — A's waiter
  // was consumed when A suspended, and P is `running`, not `suspended` — and #reconsider
  // never picks up the result of a delegated call whose child has ended (it only handles a
  // missing child). When B is cancelled, P's loop suspends on A's delegated call and stays
  // suspended for ever: the reply is `suspended` with the request { id: '', kind: 'none' },
  // pendingRequests() is empty, stats().runs stays 1, P.status 'suspended'.
  // The same happens when A is cancelled (instead of answered) while B runs.
  // Fix (RunTree.ts): keep a child's result when nobody waits for it (on the child node),
  // and in #reconsider resolve a delegated call whose child has ended with
  // taskResultOf(child, merge) (the call then resumes the parent like any resolved call).
  it('5. a subagent answered while its sibling still runs: its parent gets the answer', async (t) => {
    const { supervisor, log } = await open(t);
    const plan: Plan = {
      kind: 'delegate',
      label: 'p',
      u: 1,
      children: [
        { kind: 'ask', label: 'a', u: 1 },
        { kind: 'spin', label: 'b', u: 1, poll: false },
      ],
    };
    const parent = await supervisor.startAgent(tree0, { scope });
    const [asker, sibling] = [`${parent.id}-sub-1`, `${parent.id}-sub-2`];
    const opened = log.whenNamed('request.opened');
    const spinning = log.whenNamed('tool.execute.start', (p) => p.toolName === 'spin' && p.agentId === sibling);
    const reply = parent.send(JSON.stringify(plan));
    const question = await opened;
    await spinning;
    const askerDone = log.whenNamed('subagent.done', (p) => p.agentId === asker);
    void supervisor.answer(question.payload.request.id, { ok: true, data: 'yes' });
    await askerDone; // while the sibling still runs
    assert.equal(supervisor.cancel(sibling), true);
    const r = await reply;
    assert.equal(r.status, 'done', JSON.stringify(r));
    assert.deepEqual(JSON.parse(text(r)), {
      label: 'p',
      results: [JSON.stringify({ label: 'a', results: [{ answered: 'yes' }] }), { error: 'ERR_CANCELLED' }],
    });
    assert.equal(supervisor.stats().runs, 0);
  });

  // Bug 2 — a cancel that resumes part of a suspended parent agent's tree leaves the agent
  // `running` for ever, and close() waits its whole timeout.
  // P delegates to D (which delegates to A, who asks) and to B (asks): all suspended, the
  // send resolves `suspended`. Cancelling A ends it; D's last call is resolved, so D resumes
  // (RunTree#resume calls root.owner.resumed → ParentAgent status 'running') and ends `done`;
  // P stays suspended on B. Nothing waits on P's root (no send/answer pending), so
  // ParentAgent#settle is never called again: status stays 'running' while nothing runs.
  // close() then loops on a.whenIdle() until its timeout (default 30 s); with an injected
  // clock that is never advanced it never resolves, and a script awaiting close() exits 13
  // (the close timer is unref'd, nothing else holds the process).
  // Fix (RunTree.ts / ParentAgent.ts): tell the owner when a resumed tree is quiet again even
  // with no waiter (settle, or a `suspended()` callback), as #afterChange does for an ended root.
  it('a cancel that resumes part of a suspended tree leaves its parent agent suspended; close() drains at once', {
    timeout: 15_000,
  }, async (t) => {
    keepAlive(t);
    const clock = new ManualClock();
    const { supervisor, log } = await open(t, { clock });
    const plan: Plan = {
      kind: 'delegate',
      label: 'p',
      u: 1,
      children: [
        { kind: 'delegate', label: 'd', u: 1, children: [{ kind: 'ask', label: 'a', u: 1 }] },
        { kind: 'ask', label: 'b', u: 1 },
      ],
    };
    const parent = await supervisor.startAgent(tree0, { scope });
    assert.equal((await parent.send(JSON.stringify(plan))).status, 'suspended');
    const dDone = log.whenNamed('subagent.done', (p) => p.agentId === `${parent.id}-sub-1`);
    assert.equal(supervisor.cancel(`${parent.id}-sub-1-sub-1`), true);
    await dDone;
    assert.equal(supervisor.stats().pool.running, 0);
    assert.equal(parent.status, 'suspended');
    // Nothing runs: close() must not need its timeout (the clock never moves here).
    await supervisor.close({ timeoutMs: 1_000 });
  });

  // Bug 3 — close() called while a parent agent's message runs (a send, or an answer that
  // resumed part of its tree), which then suspends, waits its whole timeout.
  // Supervisor.close's drain awaits ParentAgent.whenIdle() ("suspended counts as idle"), but
  // the idle waiters registered while the message ran are resolved only by #pump (status
  // idle) and #stopNow — ParentAgent#settle's suspended branch never resolves them. So close()
  // waits for timeoutMs (30 s by default; measured: 3008 ms with timeoutMs 3000 after a send,
  // 3017 ms after an answer), and never resolves with an injected clock that is not advanced.
  // With the default store the answer path is asynchronous, so whether close() hangs after an
  // answer depends on timing (the property test hit it: persist true, close right after an answer).
  // Checked: resolving #idleWaiters in that branch (a one-line change in the built
  // ParentAgent.js, reverted) makes both tests below and that property case pass.
  // Fix (ParentAgent.ts): resolve the idle waiters when a message settles suspended.
  it('close() right after a send whose message then suspends drains at once', { timeout: 15_000 }, async (t) => {
    keepAlive(t);
    const clock = new ManualClock();
    const { supervisor } = await open(t, { clock });
    const parent = await supervisor.startAgent(tree0, { scope });
    const reply = parent.send(JSON.stringify({ kind: 'ask', label: 'a', u: 1 } satisfies Plan));
    // The clock never moves: only a drain can end this close().
    await supervisor.close({ timeoutMs: 1_000 });
    assert.equal((await reply).status, 'suspended');
  });

  it('close() right after an answer whose tree then suspends again drains at once', { timeout: 15_000 }, async (t) => {
    keepAlive(t);
    const clock = new ManualClock();
    const { supervisor } = await open(t, { clock });
    const plan: Plan = {
      kind: 'delegate',
      label: 'p',
      u: 1,
      children: [
        { kind: 'ask', label: 'a', u: 1 },
        { kind: 'ask', label: 'b', u: 1 },
      ],
    };
    const parent = await supervisor.startAgent(tree0, { scope });
    assert.equal((await parent.send(JSON.stringify(plan))).status, 'suspended');
    const a = supervisor.pendingRequests().find((r) => r.request.prompt === 'a');
    const answered = supervisor.answer(String(a?.request.id), { ok: false });
    await supervisor.close({ timeoutMs: 1_000 });
    assert.equal((await answered).status, 'suspended');
  });

  // Bug 4 — after close(), a suspended direct spawn's tree is left in the closed supervisor:
  // stats() says runs 2, pendingRequests 1, pool.tableSize 2, and pendingRequests() still
  // lists a request that can never be answered (answer() throws ERR_CLOSED). Its runs never
  // get a terminal event. (A parent agent's suspended conversation is saved and forgotten
  // by ParentAgent.stop → RunTree.forget; a spawn is not saved anywhere.)
  // Fix (Supervisor.close / RunTree): end suspended spawn roots at close (cancelled, shutdown,
  // their requests withdrawn), or forget them like a parent's.
  it('after close(), nothing of a suspended direct spawn is left', async (t) => {
    const { supervisor } = await open(t);
    const plan: Plan = { kind: 'delegate', label: 'p', u: 1, children: [{ kind: 'ask', label: 'a', u: 1 }] };
    const outcome = await supervisor.spawn(tree0, { input: JSON.stringify(plan), scope });
    assert.equal(outcome.status, 'suspended');
    await supervisor.close();
    assert.deepEqual(supervisor.pendingRequests(), [], 'no request nobody can answer');
    assert.equal(supervisor.stats().runs, 0);
    assert.equal(supervisor.stats().pool.tableSize, 0);
  });

  // Bug 5 — a suspended tree's total usage leaves out its suspended runs.
  // P → D → A (asks); each model turn uses 1 input and 1 output token, so when the tree
  // suspends it has used 3/3. The reply says totalUsage 1/1 (P's own only), D's
  // subagent.suspended says 1/1 (D's own, without A's). totalOf(node) adds only *ended*
  // children's totals (childUsage), so the snapshot's "subtree total" is not one.
  // Fix (RunNode.totalOf or the places that report a suspended node): add the usage of
  // suspended children (their own usage + their subtree's) to a suspended node's total.
  it("7. a suspended tree's total usage counts the tokens its suspended runs used", async (t) => {
    const { supervisor, log } = await open(t);
    const plan: Plan = {
      kind: 'delegate',
      label: 'p',
      u: 1,
      children: [{ kind: 'delegate', label: 'd', u: 1, children: [{ kind: 'ask', label: 'a', u: 1 }] }],
    };
    const parent = await supervisor.startAgent(tree0, { scope });
    const reply = await parent.send(JSON.stringify(plan));
    assert.equal(reply.status, 'suspended');
    const suspendedD = log.named('subagent.suspended').find((e) => e.payload.agentId === `${parent.id}-sub-1`);
    assert.deepEqual(suspendedD?.payload.totalUsage, { inputTokens: 2, outputTokens: 2 });
    assert.deepEqual(reply.totalUsage, { inputTokens: 3, outputTokens: 3 });
  });

  // Bug 6 — a delegation chain deeper than pool.threads deadlocks.
  // Each parent run on a worker holds its thread while its `task` call waits (piscina runs one
  // task per thread); with 2 threads, P (supervisor thread) → a → b → c: a and b hold both
  // threads, c waits in the queue for ever. stats(): pool.running 4, pool.queued 1. No error, no event:
  // the send never resolves. The default pool size is the machine's parallelism (2 here), so a
  // three-level delegation hangs with the defaults. (The same happens with fewer levels once
  // other long runs hold threads; the property test bounds such runs to pool.threads − 1.)
  // Fix (RunTree / WorkerPool): a worker run waiting on a task should not hold a thread
  // slot (e.g. grow the pool for nested tasks, or let a waiting worker take another task),
  // or at least refuse the nested task with a typed error instead of hanging.
  it('a delegation chain deeper than the pool completes', { timeout: 15_000 }, async (t) => {
    const { supervisor } = await open(t, { pool: { threads: 2 } });
    const plan: Plan = {
      kind: 'delegate',
      label: 'p',
      u: 1,
      children: [
        {
          kind: 'delegate',
          label: 'a',
          u: 1,
          children: [{ kind: 'delegate', label: 'b', u: 1, children: [{ kind: 'answer', label: 'c', u: 1 }] }],
        },
      ],
    };
    const parent = await supervisor.startAgent(tree0, { scope });
    const reply = await parent.send(JSON.stringify(plan));
    assert.equal(reply.status, 'done');
  });

  // Bug 7 — startAgent({ metadata }) nested too deep to clone rejects with a raw RangeError
  // ("Maximum call stack size exceeded", no code), not a typed error. assertCloneable passes
  // it; Supervisor.startAgent's structuredClone(metadata) overflows. (A spawn with the same
  // metadata ends `failed` with ERR_NOT_CLONEABLE, as contract 1 asks.)
  // Fix (Supervisor.startAgent): turn the clone's failure into InvalidArgumentError
  // ERR_NOT_CLONEABLE naming the option (or make assertCloneable bound the depth).
  it('12. startAgent with metadata too deep to clone rejects with a typed error', async (t) => {
    const { supervisor } = await open(t);
    let deep: Record<string, unknown> = {};
    for (let i = 0; i < 10_000; i++) deep = { d: deep };
    await assert.rejects(supervisor.startAgent(echo, { scope, metadata: deep }), (e) =>
      isTroupeError(e, 'ERR_NOT_CLONEABLE'),
    );
  });

  // Bug 8 — a parent agent's turn limit counts its whole conversation, not the message.
  // `echo` answers every message in one turn; maxTurns defaults to 16. Messages 1–16 are
  // `done`; from the 17th on every message ends `incomplete` at once (turns: 16, the model is
  // never called) — the agent is useless for ever after. The loop compares the state's
  // cumulative `turns` with agent.maxTurns (core/src/AgentLoop.ts, `state.turns >=
  // agent.maxTurns`); the failed-turn counter is reset per message, the turn limit is not.
  // Fix (AgentLoop.ts): count the turns of the current message (remember state.turns when
  // the input is added) against maxTurns.
  it('9. the turn limit counts per message: a parent agent answers its 17th message', async (t) => {
    const { supervisor } = await open(t);
    const parent = await supervisor.startAgent(echo, { scope });
    for (let i = 1; i <= 17; i++) {
      const reply = await parent.send(`message ${i}`);
      assert.equal(reply.status, 'done', `message ${i}`);
    }
  });
});

describe('the run tree: a run whose events arrive after its result', () => {
  it("waits for them, then ends the run in the async context it was started from (not the late message's)", async () => {
    const supervisor = createSupervisor({ pool: { threads: 1 }, persistence: null });
    try {
      const context = new AsyncLocalStorage<string>();
      const order: string[] = [];
      let storeAtDone: string | undefined;
      supervisor.on('tool.execute.start', (e) => order.push(`start ${e.toolName}`));
      supervisor.on('subagent.done', () => {
        order.push('subagent.done');
        storeAtDone = context.getStore();
      });
      const outcome = await context.run('the caller', () =>
        supervisor.spawn(lateEvents, { input: 'go', scope: { userId: 'u' } }),
      );
      assert.equal(outcome.status, 'done', JSON.stringify(outcome));
      assert.deepEqual(
        order,
        ['start arm', 'start call', 'subagent.done'],
        'the late batch is handled before the outcome',
      );
      assert.equal(storeAtDone, 'the caller', "the outcome is handled in the spawn's async context");
    } finally {
      await supervisor.destroy();
    }
  });
});

describe('the run tree: a worker posts only the telemetry somebody listens to', () => {
  const posted = async (listen: (s: Supervisor) => void): Promise<string[]> => {
    const supervisor = createSupervisor({ pool: { threads: 1 }, persistence: null });
    try {
      listen(supervisor);
      const outcome = await supervisor.spawn(telemetryProbe, { input: 'go', scope: { userId: 'u' } });
      assert.equal(outcome.status, 'done', JSON.stringify(outcome));
      return JSON.parse(outcome.status === 'done' ? outcome.result : '[]') as string[];
    } finally {
      await supervisor.destroy();
    }
  };

  it('tool starts are posted for a tool.execute.start listener, and model events are not', async () => {
    const names = await posted((s) => s.on('tool.execute.start', () => {}));
    assert.ok(names.includes('tool.execute.start'), names.join(', '));
    assert.deepEqual(
      names.filter((n) => n !== 'tool.execute.start'),
      [],
    );
  });

  it('nothing of tools is posted for a model.stop listener', async () => {
    const names = await posted((s) => s.on('model.stop', () => {}));
    // (A tool's start goes at once when it is forwarded; model events of a model that answers at once ride with the result.)
    assert.deepEqual(
      names.filter((n) => n.startsWith('tool.')),
      [],
    );
  });

  it('a tool.execute.stop listener gets the starts too (a killed call is reported from its start)', async () => {
    const names = await posted((s) => s.on('tool.execute.stop', () => {}));
    assert.ok(names.includes('tool.execute.start'), names.join(', '));
    assert.ok(!names.some((n) => n.startsWith('model.')), names.join(', '));
  });
});
