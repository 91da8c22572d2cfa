// Hostile-checker findings on usage totals (AgentHandle: snapshot().totalUsage is
// "tokens of the conversation's whole run trees: this agent and its subagents").
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { createSupervisor } from '@troupe/supervisor';
import { askingLead, cachedAnswerer, delegator, failingDelegator, steadyDelegator } from '../fixtures/agents/edges.js';

it("a cancelled message's subagent tokens stay in the conversation's totalUsage (the reply counts them)", async () => {
  const supervisor = createSupervisor({ pool: { threads: 1 } });
  try {
    const started = new Int32Array(new SharedArrayBuffer(4));
    const agent = await supervisor.startAgent(delegator, { scope: {}, toolContext: { started } });
    const replying = agent.send('go');
    // The subagent has spent its first turn's tokens and waits in its tool.
    await Atomics.waitAsync(started, 0, 0).value;
    assert.equal(agent.cancel(), true);
    const reply = await replying;
    assert.equal(reply.status, 'cancelled');
    assert.deepEqual(reply.totalUsage, { inputTokens: 1001, outputTokens: 1001 });
    // The tokens were spent: the conversation's total must not forget them.
    assert.deepEqual(agent.snapshot().totalUsage, reply.totalUsage);
  } finally {
    await supervisor.destroy();
  }
});

it("a failed message's tokens (its own and its subagent's) stay in the conversation's usage (the reply counts them)", async () => {
  const supervisor = createSupervisor({ pool: { threads: 1 } });
  try {
    const agent = await supervisor.startAgent(failingDelegator, { scope: {} });
    const reply = await agent.send('go');
    assert.equal(reply.status, 'failed');
    assert.deepEqual(reply.usage, { inputTokens: 1, outputTokens: 1 });
    assert.deepEqual(reply.totalUsage, { inputTokens: 101, outputTokens: 101 });
    // Restarted from its last saved state — but the tokens were spent.
    const snapshot = agent.snapshot();
    assert.deepEqual(
      { usage: snapshot.usage, totalUsage: snapshot.totalUsage },
      { usage: reply.usage, totalUsage: reply.totalUsage },
    );
  } finally {
    await supervisor.destroy();
  }
});

it("a reply's usage is its message's (the snapshot's is the conversation's), on every message", async () => {
  const supervisor = createSupervisor({ pool: { threads: 1 } });
  try {
    const agent = await supervisor.startAgent(steadyDelegator, { scope: {} });
    for (let n = 1; n <= 3; n++) {
      const reply = await agent.send(`go ${n}`);
      assert.equal(reply.status, 'done');
      // Documented: the message's own model calls, and its whole tree's.
      assert.deepEqual(reply.usage, { inputTokens: 2, outputTokens: 2 }, `message ${n}`);
      assert.deepEqual(reply.totalUsage, { inputTokens: 102, outputTokens: 102 }, `message ${n}`);
      const snapshot = agent.snapshot();
      assert.deepEqual(snapshot.usage, { inputTokens: 2 * n, outputTokens: 2 * n });
      assert.deepEqual(snapshot.totalUsage, { inputTokens: 102 * n, outputTokens: 102 * n });
    }
  } finally {
    await supervisor.destroy();
  }
});

it("a reply's cached and reasoning tokens are its message's too, on every message", async () => {
  const supervisor = createSupervisor({ pool: { threads: 1 } });
  try {
    const agent = await supervisor.startAgent(cachedAnswerer, { scope: {} });
    for (let n = 1; n <= 2; n++) {
      const reply = await agent.send(`hi ${n}`);
      assert.deepEqual(
        reply.usage,
        { inputTokens: 10, outputTokens: 5, cachedInputTokens: 4, reasoningTokens: 2 },
        `message ${n}`,
      );
    }
    assert.deepEqual(agent.snapshot().usage, {
      inputTokens: 20,
      outputTokens: 10,
      cachedInputTokens: 8,
      reasoningTokens: 4,
    });
  } finally {
    await supervisor.destroy();
  }
});

it('while a message is suspended, snapshot().totalUsage counts its subagents (as the reply does), on every message', async () => {
  const supervisor = createSupervisor({ pool: { threads: 1 } });
  try {
    const agent = await supervisor.startAgent(askingLead, { scope: {} });
    let before = { inputTokens: 0, outputTokens: 0 };
    for (let n = 1; n <= 2; n++) {
      const reply = await agent.send(`go ${n}`);
      assert.equal(reply.status, 'suspended');
      // The lead's first call (1) and the subagent's first turn (100), which asked.
      assert.deepEqual(reply.totalUsage, { inputTokens: 101, outputTokens: 101 }, `message ${n}`);
      assert.deepEqual(
        agent.snapshot().totalUsage,
        { inputTokens: before.inputTokens + 101, outputTokens: before.outputTokens + 101 },
        `message ${n}: the snapshot while suspended`,
      );
      const done = await supervisor.answer((reply as { request: { id: string } }).request.id, { ok: true });
      assert.equal(done.status, 'done');
      before = agent.snapshot().totalUsage;
      assert.deepEqual(before, { inputTokens: 202 * n, outputTokens: 202 * n }, `message ${n}: after the answer`);
    }
  } finally {
    await supervisor.destroy();
  }
});

it('agent.failed carries the run (path) and its usage, as every other terminal event does', async () => {
  const supervisor = createSupervisor({ pool: { threads: 1 } });
  try {
    const failed: { path: readonly string[]; usage: unknown; totalUsage: unknown }[] = [];
    supervisor.on('agent.failed', (e) => failed.push({ path: e.path, usage: e.usage, totalUsage: e.totalUsage }));
    const agent = await supervisor.startAgent(failingDelegator, { scope: {} });
    const reply = await agent.send('go');
    assert.equal(reply.status, 'failed');
    assert.deepEqual(failed, [{ path: [agent.id], usage: reply.usage, totalUsage: reply.totalUsage }]);
  } finally {
    await supervisor.destroy();
  }
});
