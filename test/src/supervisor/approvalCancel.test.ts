// A tool waiting on the host's approval handler is cancellable, on the supervisor's thread (a
// parent agent's own tool) and on a worker: cancel(), close() and destroy() end the wait at
// once, whatever the handler does with its signal. Hostile-tester finding: a parent's tool whose
// handler waited (on a person, on a service) could not be cancelled at all — cancel() returned
// true and the status stayed running, close() never resolved, destroy() left the process to exit
// 13 — because the executor awaited the handler without racing the run's cancellation and the
// handler's signal aborted only once the run had ended. On a worker the same wait ended only
// when the grace period killed the thread (`forced`).
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import type { ApprovalHandler } from '@troupe/core';
import { createSupervisor, type Supervisor, type SupervisorOptions } from '@troupe/supervisor';
import { gated, gatedLead } from '../fixtures/agents/approvalWait.js';

const scope = { userId: 'u_approval' };

interface Harness {
  readonly supervisor: Supervisor;
  /** Resolves when the handler is first called. */
  readonly asked: Promise<void>;
  /** Whether the handler's signal aborted. */
  readonly aborted: () => boolean;
  readonly ran: Int32Array;
}

/**
 * A supervisor whose approval handler waits until `decide` resolves (never, by default) and
 * ignores its signal unless `honour`; it records whether the signal aborted.
 */
function open(
  t: TestContext,
  options: { honour?: boolean; decide?: Promise<unknown>; pool?: SupervisorOptions['pool'] } = {},
): Harness {
  let onAsked: (() => void) | undefined;
  const asked = new Promise<void>((resolve) => {
    onAsked = resolve;
  });
  let aborted = false;
  const approval: ApprovalHandler = (_request, { signal }) =>
    new Promise((resolve, reject) => {
      signal.addEventListener('abort', () => {
        aborted = true;
        if (options.honour === true) reject(signal.reason);
      });
      options.decide?.then((d) => resolve(d as never));
      onAsked?.();
    });
  const supervisor = createSupervisor({
    pool: options.pool ?? { threads: 1, graceMs: 30_000 },
    persistence: null,
    approval,
  });
  t.after(() => supervisor.destroy());
  return { supervisor, asked, aborted: () => aborted, ran: new Int32Array(new SharedArrayBuffer(4)) };
}

const runs = (ran: Int32Array) => Atomics.load(ran, 0);

describe("a parent agent's tool waiting on the approval handler", () => {
  for (const honour of [false, true]) {
    it(`cancel() ends the message cancelled at once (the handler ${honour ? 'honours' : 'ignores'} its signal)`, async (t) => {
      const h = open(t, { honour });
      const agent = await h.supervisor.startAgent(gated, { scope, toolContext: { ran: h.ran } });
      const reply = agent.send('go');
      await h.asked;
      assert.equal(h.supervisor.cancel(agent.id), true);
      const r = await reply;
      assert.equal(r.status, 'cancelled');
      assert.equal(r.status === 'cancelled' && r.reason, 'user');
      assert.equal(h.aborted(), true, "the handler's signal aborts when its run is cancelled");
      assert.equal(runs(h.ran), 0, 'the tool never ran');
      assert.deepEqual(h.supervisor.pendingRequests(), []);
    });
  }

  it('close({ timeoutMs }) cancels the wait at its deadline and resolves; send settles cancelled (shutdown)', async (t) => {
    const h = open(t);
    const agent = await h.supervisor.startAgent(gated, { scope, toolContext: { ran: h.ran } });
    const reply = agent.send('go');
    await h.asked;
    await h.supervisor.close({ timeoutMs: 20 });
    const r = await reply;
    assert.equal(r.status, 'cancelled');
    assert.equal(r.status === 'cancelled' && r.reason, 'shutdown');
    assert.equal(runs(h.ran), 0);
  });

  it('destroy() ends it too, and the reply settles before destroy() resolves', async (t) => {
    const h = open(t);
    const agent = await h.supervisor.startAgent(gated, { scope, toolContext: { ran: h.ran } });
    let settled: string | undefined;
    const reply = agent.send('go').then((r) => {
      settled = r.status;
      return r;
    });
    await h.asked;
    await h.supervisor.destroy();
    assert.equal(settled, 'cancelled');
    assert.equal((await reply).status, 'cancelled');
  });

  it("a handler that answers 'ask' after the cancel opens no request; one that approves runs nothing", async (t) => {
    for (const decision of [{ decision: 'ask', prompt: 'may I?' }, { decision: 'approve' }]) {
      let decide: ((d: unknown) => void) | undefined;
      const h = open(t, {
        decide: new Promise((resolve) => {
          decide = resolve;
        }),
      });
      const opened: string[] = [];
      h.supervisor.on('request.opened', (e) => opened.push(e.request.id));
      const agent = await h.supervisor.startAgent(gated, { scope, toolContext: { ran: h.ran } });
      const reply = agent.send('go');
      await h.asked;
      h.supervisor.cancel(agent.id);
      assert.equal((await reply).status, 'cancelled');
      decide?.(decision);
      // The handler's late answer reaches the run tree on a later turn of the event loop.
      await new Promise((resolve) => setImmediate(resolve));
      assert.deepEqual(
        { opened, pending: h.supervisor.pendingRequests(), ran: runs(h.ran) },
        {
          opened: [],
          pending: [],
          ran: 0,
        },
      );
    }
  });
});

describe("a subagent's tool waiting on the approval handler (on a worker)", () => {
  it('cancel() of the parent ends the child cancelled without a kill (not forced), at once', async (t) => {
    const h = open(t);
    const ended: { reason: string; forced: boolean }[] = [];
    h.supervisor.on('subagent.cancelled', (e) => ended.push({ reason: e.reason, forced: e.forced }));
    const agent = await h.supervisor.startAgent(gatedLead, { scope, toolContext: { ran: h.ran } });
    const reply = agent.send('go');
    await h.asked;
    h.supervisor.cancel(agent.id);
    const r = await reply;
    assert.equal(r.status, 'cancelled');
    assert.deepEqual(ended, [{ reason: 'parent', forced: false }], 'graceMs is 30 s: a kill would time the test out');
    assert.equal(h.aborted(), true);
    assert.equal(runs(h.ran), 0);
  });
});
