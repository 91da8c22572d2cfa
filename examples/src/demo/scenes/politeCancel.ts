import type { Supervisor } from '@troupe/supervisor';
import { coordinator } from '../../agents/coordinator.js';
import { createProbe, Probe, sharedNow, stampOf } from '../../agents/probe.js';
import { BareSpinner } from '../BareSpinner.js';
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
  const cancelled = nextEvent(
    supervisor,
    'subagent.cancelled',
    (e) => e.parentAgentId === agentId,
    `${agentId}'s cruncher subagent to end cancelled`,
  );
  const replied = math.send('cruncher: sum primes');
  await probeReached(probe, Probe.pollStarted, `sum_primes to start on a worker (${agentId} delegating to cruncher)`);
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

/** Over this median, even a bare spinning thread sees a store late: the machine is too busy to hold a bound. */
const BUSY_ABOVE_MS = 1;
/** The bound Troupe's cancel is held to when the machine is not busy. */
const BOUND_MS = 5;

type CancelRun = Awaited<ReturnType<typeof cancelPoliteRun>>;

interface Round {
  readonly runs: readonly CancelRun[];
  /** A bare store → a bare spinning thread saw it, taken between the runs. */
  readonly bare: readonly number[];
}

const noticedOf = (r: Round): number[] => r.runs.map((x) => x.noticed);
const busy = (r: Round): boolean => median(r.bare) > BUSY_ABOVE_MS;
const holds = (r: Round): boolean => busy(r) || median(noticedOf(r)) < BOUND_MS;

/** `RUNS` cancels, each after a bare store measured the same way: the two see the same machine. */
async function round(stage: Stage, spinner: BareSpinner, first: number): Promise<Round> {
  const runs: CancelRun[] = [];
  const bare: number[] = [];
  for (let i = first + 1; i <= first + RUNS; i++) {
    bare.push(await spinner.storeSeenAfter());
    runs.push(await cancelPoliteRun(stage.supervisor, `math-${i}`, stage.run));
  }
  return { runs, bare };
}

const spread = (values: readonly number[]): string =>
  `median of ${values.length}; min ${formatDuration(Math.min(...values))}, max ${formatDuration(Math.max(...values))}`;

/**
 * A CPU-bound tool that reads its cancellation flag (one Atomics.load) in
 * its hot loop, cancelled from the top. Held to a bound when the machine
 * lets a bare spinning thread see a store promptly (measured between the
 * runs); a round another process disturbed is measured once more.
 */
export async function politeCancel(stage: Stage): Promise<void> {
  const tour: Narrator = stage.tour;
  stage.begin('3. A CPU-bound tool that sees a cancel at once, through shared memory');
  tour.say('sum_primes spins on a worker and checks ctx.isCancelled() on every iteration; its parent is cancelled.');
  const spinner = await BareSpinner.start();
  const rounds: Round[] = [];
  try {
    rounds.push(await round(stage, spinner, 0));
    if (!holds(rounds[0] as Round)) rounds.push(await round(stage, spinner, RUNS));
  } finally {
    await spinner.close();
  }
  const last = rounds.at(-1) as Round;
  const runs = rounds.flatMap((r) => r.runs);
  await stage.showTree();
  for (const [i, r] of rounds.entries()) {
    if (i > 0) tour.note('Another process held the cores during those: measured again.');
    tour.say(`cancel → the tool saw it: ${fig(formatDuration(median(noticedOf(r))))} (${spread(noticedOf(r))})`);
    tour.say(`a bare store → a bare spinning thread saw it: ${formatDuration(median(r.bare))} (${spread(r.bare)})`);
  }
  const noticed = noticedOf(last);
  tour.check(
    // The tool stamps when it saw the flag, in the clock base every thread shares. A cancel sent
    // as a message would not arrive while the tool spins: the flag was read inside its loop.
    runs.every((r) => Number.isFinite(r.noticed) && r.noticed >= 0) && holds(last),
    busy(last)
      ? `the machine is busy (even a bare thread saw a store after ${formatDuration(median(last.bare))}), so no bound is claimed this run; the tool saw the cancel after ${fig(formatDuration(median(noticed)))}`
      : `the tool saw the cancel ${fig(formatDuration(median(noticed)))} after it was made (median), within ${BOUND_MS} ms: the flag is in shared memory, read by one Atomics.load`,
    rounds.map((r) => ({ noticed: noticedOf(r), bare: r.bare })),
  );
  tour.record(
    'cancel → tool saw it',
    formatDuration(median(noticed)),
    `median of ${RUNS}, CPU-bound tool on a worker (bare store: ${formatDuration(median(last.bare))})`,
  );
  tour.note("The parent's cancel is pushed down to its child's slot in shared memory.");
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
