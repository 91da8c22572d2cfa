// Hostile-checker finding: a tool that overruns its timeoutMs without yielding is a
// timeout in a subagent (ERR_TOOL_TIMEOUT: terminal, DESIGN §3, nous ToolExecutor) but
// its late value is taken as a success when the same agent runs as a parent agent.
// (README "Known limits": a parent's CPU-bound tool cannot be killed — but its result
// arrived after the deadline, so the call timed out all the same.)
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { createSupervisor } from '@troupe/supervisor';
import { overrunner } from '../fixtures/agents/edges.js';

const TIMED_OUT = /ERR_TOOL_TIMEOUT/;

it('control: in a subagent, a tool that overran its timeoutMs is reported timed out', async () => {
  // graceMs is large so the worker is not killed: the tool returns, late.
  const supervisor = createSupervisor({ pool: { threads: 1, graceMs: 5000 } });
  try {
    const outcome = await supervisor.spawn(overrunner, { input: 'go', scope: {} });
    assert.equal(outcome.status, 'done');
    assert.match(String(outcome.status === 'done' && outcome.result), TIMED_OUT);
  } finally {
    await supervisor.destroy();
  }
});

it('in a parent agent, the same overrun is reported timed out too (not taken as a success)', async () => {
  const supervisor = createSupervisor({ pool: { threads: 1, graceMs: 5000 } });
  try {
    const agent = await supervisor.startAgent(overrunner, { scope: {} });
    const reply = await agent.send('go');
    assert.equal(reply.status, 'done');
    assert.match(String(reply.status === 'done' && reply.text), TIMED_OUT);
  } finally {
    await supervisor.destroy();
  }
});
