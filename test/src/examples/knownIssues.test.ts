// Regression tests for library bugs found while writing the examples
// (first filed here as `todo` tests; fixed in 35a2b23).
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { it } from 'node:test';
import { ToolTimeoutError } from '@troupe/core';
import { createSupervisor, type SupervisorEvents } from '@troupe/supervisor';
import { spinner } from '../fixtures/agents/cancellable.js';
import { bootTime } from './bootTime.js';

// Was: ready() resolved in a microtask (piscina marks its first workers ready at once),
// so the first run after it still paid the whole thread boot.
it('pool.ready() resolves once every thread has started', async () => {
  const supervisor = createSupervisor({ pool: { threads: 1 } });
  try {
    await supervisor.pool.ready();
    const readyAt = performance.timeOrigin + performance.now();
    const outcome = await supervisor.spawn(bootTime, { input: 'when?', scope: {} });
    assert.equal(outcome.status, 'done');
    const bootedAt = Number(outcome.status === 'done' ? outcome.result : Number.NaN);
    assert.ok(
      bootedAt <= readyAt,
      `the worker finished booting ${(bootedAt - readyAt).toFixed(1)} ms after ready() resolved`,
    );
  } finally {
    await supervisor.destroy();
  }
});

// Was: the kill path reported `tool "a tool (call lane 0)" timed out after 0 ms` and
// no tool.execute.timeout followed the worker's tool.execute.start.
it('a tool killed for overrunning its timeout is reported with its name and timeout, and a tool.execute.timeout event', async () => {
  const supervisor = createSupervisor({ pool: { threads: 1, graceMs: 20 } });
  const timeouts: SupervisorEvents['tool.execute.timeout'][0][] = [];
  supervisor.on('tool.execute.timeout', (e) => timeouts.push(e));
  try {
    // `spinner`'s tool `spin` has timeoutMs 50 and never yields.
    const outcome = await supervisor.spawn(spinner, { input: 'spin', scope: {} });
    assert.equal(outcome.status, 'failed');
    const error = outcome.status === 'failed' ? outcome.error : undefined;
    assert.ok(error instanceof ToolTimeoutError && error.forced);
    assert.equal(error.toolName, 'spin');
    assert.equal(error.timeoutMs, 50);
    assert.deepEqual(
      timeouts.map((e) => [e.toolName, e.timeoutMs]),
      [['spin', 50]],
    );
  } finally {
    await supervisor.destroy();
  }
});
