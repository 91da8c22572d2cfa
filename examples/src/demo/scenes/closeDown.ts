import { performance } from 'node:perf_hooks';
import { isTroupeError } from '@troupe/core';
import { coordinator } from '../../agents/coordinator.js';
import { demoScope } from '../demoScope.js';
import { formatDuration, type Narrator } from '../Narrator.js';
import type { Stage } from '../Stage.js';

/** close(): refuse new work, let what runs finish, stop every worker; then use fails loudly. */
export async function closeDown(stage: Stage): Promise<void> {
  const tour: Narrator = stage.tour;
  const { supervisor } = stage;
  stage.begin('10. close(): refuse new work, finish what runs, stop every worker');
  const late = await supervisor.startAgent(coordinator, {
    agentId: 'late',
    conversationId: stage.run,
    scope: demoScope,
    toolContext: { requestId: 'req-late' },
  });
  const inFlight = late.send('analyst: billing');
  const t0 = performance.now();
  await supervisor.close({ timeoutMs: 2000 });
  const took = performance.now() - t0;
  const reply = await inFlight;
  let refused: unknown;
  try {
    await supervisor.startAgent(coordinator, { scope: demoScope, toolContext: { requestId: 'req-closed' } });
  } catch (error) {
    refused = error;
  }
  const stats = supervisor.stats();
  await stage.showTree();
  tour.check(
    reply.status === 'done' && stats.pool.threads === 0 && stats.pool.running === 0,
    `close({ timeoutMs: 2000 }) let the in-flight message finish and resolved after every worker exited (${formatDuration(took)}, 0 threads)`,
    { reply, stats },
  );
  tour.check(isTroupeError(refused, 'ERR_CLOSED'), 'use after close fails loudly: ERR_CLOSED', refused);
  await stage.end();
}
