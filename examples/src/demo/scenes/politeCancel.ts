import type { Supervisor } from '@troupe/supervisor';
import { coordinator } from '../../agents/coordinator.js';
import { createProbe, Probe, sharedNow, stampOf } from '../../agents/probe.js';
import { demoScope } from '../demoScope.js';
import { formatDuration, type Narrator } from '../Narrator.js';
import { nextEvent } from '../nextEvent.js';
import type { Stage } from '../Stage.js';
import { probeReached } from '../watchProbe.js';
import { fig } from '../wrapText.js';

const RUNS = 5;

/** Start a run whose tool spins politely, cancel its parent once the tool runs, and time both ends. */
async function cancelPoliteRun(supervisor: Supervisor, agentId: string, conversationId: string) {
  const probe = createProbe();
  const math = await supervisor.startAgent(coordinator, {
    agentId,
    conversationId,
    scope: demoScope,
    toolContext: { requestId: `req-${agentId}`, probe },
  });
  const cancelled = nextEvent(supervisor, 'subagent.cancelled', (e) => e.parentAgentId === agentId);
  const replied = math.send('cruncher: sum primes');
  await probeReached(probe, Probe.pollStarted);
  const t0 = sharedNow();
  math.cancel('user');
  // Wait without spinning: on a small machine the worker needs this CPU more than we do.
  const reply = await replied;
  return {
    reply,
    child: await cancelled,
    noticed: stampOf(probe, Probe.pollNoticed) - t0,
    settled: sharedNow() - t0,
  };
}

const median = (values: readonly number[]): number =>
  [...values].sort((a, b) => a - b)[values.length >> 1] ?? Number.NaN;

/** A CPU-bound tool that reads its cancellation flag (one Atomics.load) in its hot loop, cancelled from the top. */
export async function politeCancel(stage: Stage): Promise<void> {
  const tour: Narrator = stage.tour;
  const { supervisor } = stage;
  stage.begin('3. A CPU-bound tool that sees a cancel in microseconds');
  tour.say('sum_primes spins on a worker and checks ctx.isCancelled() on every iteration; its parent is cancelled.');
  const runs = [];
  for (let i = 1; i <= RUNS; i++) runs.push(await cancelPoliteRun(supervisor, `math-${i}`, stage.run));
  await stage.showTree();
  const noticed = runs.map((r) => r.noticed);
  tour.check(
    // The tool stamps when it saw the flag, in the clock base every thread shares. A cancel sent
    // as a message would not arrive while the tool spins: the flag was read inside its loop.
    noticed.every((n) => Number.isFinite(n) && n >= 0) && median(noticed) < 5,
    `cancel → the tool saw it: ${fig(formatDuration(median(noticed)))} (median of ${RUNS}; min ${formatDuration(Math.min(...noticed))}, max ${formatDuration(Math.max(...noticed))}), across threads`,
    noticed,
  );
  tour.record('cancel → tool saw it', formatDuration(median(noticed)), `median of ${RUNS}, CPU-bound tool on a worker`);
  tour.note(
    "The parent's cancel is pushed down to its child's slot in shared memory; the tool's check is one Atomics.load.",
  );
  tour.check(
    runs.every(
      (r) =>
        r.reply.status === 'cancelled' && r.reply.reason === 'user' && r.child.reason === 'parent' && !r.child.forced,
    ),
    `each parent ended cancelled (user), its child cancelled (parent), forced: false — the tool stopped by itself, no worker was killed; cancel → reply ${formatDuration(median(runs.map((r) => r.settled)))} (median)`,
    runs.map((r) => [r.reply, r.child.reason, r.child.forced]),
  );
  await stage.end();
}
