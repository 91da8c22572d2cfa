// Hostile-checker finding: stream()'s highWaterMark is not checked. `Math.max(1, x)`
// makes a non-number NaN, and a NaN bound is never reached: the buffer of a slow
// consumer is no longer bounded (AgentStream). Bad input: a typed error (STYLE/DESIGN).
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { InvalidArgumentError } from '@troupe/core';
import { createSupervisor } from '@troupe/supervisor';
import { echo } from '../fixtures/agents/basic.js';

it('stream(message, { highWaterMark }) refuses a value that is not a number', async () => {
  const supervisor = createSupervisor({ pool: { threads: 1 } });
  try {
    const agent = await supervisor.startAgent(echo, { scope: {} });
    for (const highWaterMark of ['many', Number.NaN, {}]) {
      let thrown: unknown;
      try {
        const stream = agent.stream('hi', { highWaterMark: highWaterMark as number });
        for await (const _chunk of stream) {
          // drain
        }
        await stream.reply;
      } catch (error) {
        thrown = error;
      }
      assert.ok(thrown instanceof InvalidArgumentError, `highWaterMark ${String(highWaterMark)} was accepted`);
    }
  } finally {
    await supervisor.destroy();
  }
});
