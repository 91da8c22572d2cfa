import { performance } from 'node:perf_hooks';
import { ToolTimeoutError } from '@troupe/core';
import { coordinator } from '../../agents/coordinator.js';
import { CRUNCH_TIMEOUT_MS } from '../../agents/cpu.js';
import { createProbe, Probe, stampOf } from '../../agents/probe.js';
import { demoScope } from '../demoScope.js';
import { formatDuration, type Narrator } from '../Narrator.js';
import { nextEvent } from '../nextEvent.js';
import { reportsOf } from '../reportsOf.js';
import type { Stage } from '../Stage.js';
import { probeReached } from '../watchProbe.js';
import { fig } from '../wrapText.js';

/** A tool that never yields, stopped at its deadline: the watchdog sets its flag, waits the grace, then kills the thread. */
export async function runaway(stage: Stage, graceMs: number): Promise<void> {
  const tour: Narrator = stage.tour;
  const { supervisor } = stage;
  stage.begin('2. A tool that never yields, killed at its deadline');
  tour.say(
    `validate_input runs a backtracking regex (2^40 steps) inside one call: no await, no check; timeoutMs ${CRUNCH_TIMEOUT_MS}`,
  );
  const probe = createProbe();
  const forms = await supervisor.startAgent(coordinator, {
    agentId: 'forms',
    conversationId: stage.run,
    scope: demoScope,
    toolContext: { requestId: 'req-forms', probe },
  });
  const failed = nextEvent(
    supervisor,
    'subagent.failed',
    (e) => e.parentAgentId === 'forms',
    "forms's validator subagent to fail at its tool's deadline",
  );
  const recycled = nextEvent(
    supervisor,
    'worker.recycled',
    (e) => e.agentId === 'forms-sub-1',
    'the worker running validate_input to be killed',
  );
  const replied = forms.send('validator: check the signup form');
  await probeReached(probe, Probe.crunchStarted, 'validate_input to start on a worker (forms delegating to validator)');
  const failure = await failed;
  const kill = await recycled;
  const reply = await replied;
  // Then the same agent again: the pool has replaced the killed thread.
  const before = supervisor.stats().pool.completed;
  const t0 = performance.now();
  const next = reportsOf(await forms.send('analyst: checkout'));
  const took = performance.now() - t0;
  const after = supervisor.stats();
  await stage.showTree();
  const deadline = stampOf(probe, Probe.crunchStarted) + CRUNCH_TIMEOUT_MS;
  const afterDeadline = kill.at - deadline;
  const error = failure.error;
  tour.check(
    error instanceof ToolTimeoutError && error.forced && kill.reason === 'tool-timeout',
    'ERR_TOOL_TIMEOUT, forced: the watchdog terminated the worker thread running it (worker.recycled: tool-timeout)',
    { error, kill },
  );
  tour.check(
    afterDeadline >= graceMs - 1 && afterDeadline < graceMs + 1000,
    `deadline → kill: ${fig(formatDuration(afterDeadline))} — at the deadline its cancel flag was set, it never looked, and after the ${graceMs} ms grace its thread was killed`,
    { afterDeadline, graceMs },
  );
  tour.record('deadline → kill', formatDuration(afterDeadline), `a tool that never yields (grace ${graceMs} ms)`);
  const reports = reportsOf(reply);
  tour.check(
    reports[0] !== undefined && 'error' in reports[0] && reports[0].error.code === 'ERR_TOOL_TIMEOUT',
    'the coordinator got an error result for that task (a timeout is terminal: never retried) and answered',
    reports,
  );
  tour.check(
    next.length === 1 &&
      'ok' in (next[0] ?? {}) &&
      after.pool.completed === before + 1 &&
      after.pool.threads === stage.threads,
    `the pool replaced the worker (${after.pool.threads} threads) and kept serving: the next task (forms-sub-2) took ${formatDuration(took)}`,
    next,
  );
  await stage.end();
}
