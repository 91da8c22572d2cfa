import { isTroupeError } from '@troupe/core';
import { coordinator } from '../../agents/coordinator.js';
import { demoScope } from '../demoScope.js';
import type { Narrator } from '../Narrator.js';
import { nextEvent } from '../nextEvent.js';
import { reportsOf } from '../reportsOf.js';
import type { Stage } from '../Stage.js';

/** A worker that dies takes only its own run down: a defect, reported as one. */
export async function crash(stage: Stage): Promise<void> {
  const tour: Narrator = stage.tour;
  const { supervisor } = stage;
  stage.begin('8. A crash is contained');
  const crashed = nextEvent(
    supervisor,
    'subagent.crashed',
    (e) => e.parentAgentId === 'reports',
    "the worker of reports's exporter subagent to crash",
  );
  const reports = await supervisor.startAgent(coordinator, {
    agentId: 'reports',
    conversationId: stage.run,
    scope: demoScope,
    toolContext: { requestId: 'req-reports' },
  });
  const reply = await reports.send('exporter: weekly\nanalyst: search');
  const event = await crashed;
  await stage.showTree();
  const [exported, inspected] = reportsOf(reply);
  tour.check(
    event.agentId === 'reports-sub-1' && isTroupeError(event.error, 'ERR_WORKER_CRASHED'),
    `reports-sub-1's worker died (exit code ${event.exitCode}): an uncaught throw from a callback — a defect, not a failure`,
    event,
  );
  tour.check(
    exported !== undefined &&
      'error' in exported &&
      exported.error.code === 'ERR_WORKER_CRASHED' &&
      inspected !== undefined &&
      'ok' in inspected,
    'its sibling reports-sub-2 finished, the coordinator got an error result for the crashed task and answered',
    reply,
  );
  await stage.end();
}
