// Issue 31, item 10: a tool returns a `pending` result built by hand (the ToolResult mark is a
// registered symbol) whose request is malformed. The executor took it as it was: a parent agent
// suspended on a request the host cannot show or answer, or its loop failed as a defect; on a
// worker the run ended crashed and its thread was recycled. The executor checks the request as
// ToolResult.pending does: a typed error result (ERR_INVALID_ARGUMENT, ERR_NOT_CLONEABLE) the model sees, and the
// run goes on — on every thread.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createSupervisor, type Supervisor } from '@troupe/supervisor';
import { handBuilder, MALFORMED, type Malformed } from '../fixtures/agents/handBuiltPending.js';

const scope = Object.freeze({ tenant: 't-hand-built' });

/** The model's view of the tool's result (the agent replies with it): an error that names the request. */
function sawError(text: string, shape: string): void {
  const results = JSON.parse(text) as { isError: boolean; content: { error?: string; code?: string } }[];
  assert.equal(results.length, 1, text);
  const [r] = results;
  assert.equal(r?.isError, true, `${shape}: ${text}`);
  // (Data that cannot cross a thread says so with its own code.)
  assert.equal(r?.content.code, shape === 'functionData' ? 'ERR_NOT_CLONEABLE' : 'ERR_INVALID_ARGUMENT', text);
  assert.match(String(r?.content.error), /the tool returned a pending result whose request is malformed/, text);
}

describe('a pending result built by hand, with a malformed request', () => {
  let supervisor: Supervisor;
  const recycled: unknown[] = [];
  before(async () => {
    supervisor = createSupervisor({ pool: { threads: 1 }, persistence: null });
    supervisor.on('worker.recycled', (e) => recycled.push(e));
    await supervisor.ready();
  });
  after(async () => {
    await supervisor.destroy();
  });

  for (const shape of Object.keys(MALFORMED) as Malformed[]) {
    it(`${shape}, on a worker: an error result the model sees; the run ends done, its thread kept`, async () => {
      const outcome = await supervisor.spawn(handBuilder, { input: shape, scope, timeoutMs: 20_000 });
      assert.equal(outcome.status, 'done', JSON.stringify(outcome));
      if (outcome.status !== 'done') return;
      sawError(outcome.result, shape);
      assert.deepEqual(recycled, []);
      assert.equal(supervisor.pendingRequests().length, 0);
    });

    it(`${shape}, a parent agent's own tool: an error result the model sees; the message ends done`, async () => {
      const agent = await supervisor.startAgent(handBuilder, { scope });
      const reply = await agent.send(shape);
      assert.equal(reply.status, 'done', JSON.stringify(reply));
      if (reply.status !== 'done') return;
      sawError(reply.text, shape);
      assert.equal(agent.status, 'idle');
      assert.equal(supervisor.pendingRequests().length, 0);
      await supervisor.stopAgent(agent.id);
    });
  }
});
