// A parent agent's reply is being saved to a store that never answers (a network database that
// went away) when its owner stops it: close(), destroy() or stopAgent(). Each is bounded by the
// grace period, and the caller awaiting the reply is told (the reply is `failed`, with an error
// saying the save was given up on) — never left with a promise that does not settle.
// Hostile-tester finding: close() and destroy() resolved and dropped the agent with its `send`
// still pending for ever; stopAgent() waited without bound and with nothing holding the process
// (a script exited 13).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isTroupeError } from '@troupe/core';
import { createSupervisor, MemoryPersistence } from '@troupe/supervisor';
import { echo } from '../fixtures/agents/basic.js';
import { HangingStore } from '../fixtures/hangingStore.js';

describe("a reply being saved to a store that never answers, when its agent's owner stops it", () => {
  for (const [how, code] of [
    ['close', 'ERR_CLOSED'],
    ['destroy', 'ERR_CLOSED'],
    ['stopAgent', 'ERR_AGENT_STOPPED'],
  ] as const) {
    it(`${how}(): resolves after the grace period, and send() has settled failed (${code})`, async () => {
      const store = new HangingStore();
      const supervisor = createSupervisor({ pool: { threads: 1, graceMs: 50 }, persistence: store });
      try {
        const agent = await supervisor.startAgent(echo, { scope: {} });
        store.hang = true;
        let settled: unknown;
        const replying = agent.send('hello').then(
          (reply) => {
            settled = reply;
          },
          (error: unknown) => {
            settled = error;
          },
        );
        await store.entered;
        const late: string[] = [];
        let stopped = false;
        supervisor.on('agent.done', () => {
          if (stopped) late.push('agent.done');
        });
        if (how === 'close') await supervisor.close({ timeoutMs: 50 });
        else if (how === 'destroy') await supervisor.destroy();
        else await supervisor.stopAgent(agent.id);
        stopped = true;
        await replying;
        // As a reply whose save failed is reported: `failed`, with the error saying what happened.
        const reply = settled as { status?: string; error?: Error; restarted?: boolean };
        assert.equal(reply.status, 'failed', `send() settled ${JSON.stringify(settled)}`);
        assert.ok(isTroupeError(reply.error, code), `the reply's error: ${reply.error?.name}: ${reply.error?.message}`);
        assert.match(reply.error?.message ?? '', /grace period \(50 ms\)/);
        assert.equal(reply.restarted, false);
        assert.equal(supervisor.agent(agent.id), undefined);
        assert.deepEqual(late, []);
      } finally {
        await supervisor.destroy();
      }
    });
  }
});

describe('stopAgent() and a store that fails', () => {
  it("a store's error releasing the agent reaches the caller of stopAgent() (bounded, not swallowed)", async () => {
    class FailingRelease extends MemoryPersistence {
      override async release(): Promise<boolean> {
        throw new Error('disk gone');
      }
    }
    const supervisor = createSupervisor({ pool: { threads: 1, graceMs: 50 }, persistence: new FailingRelease() });
    try {
      const agent = await supervisor.startAgent(echo, { scope: {} });
      assert.equal((await agent.send('hello')).status, 'done');
      await assert.rejects(supervisor.stopAgent(agent.id), /disk gone/);
    } finally {
      await supervisor.destroy();
    }
  });
});
