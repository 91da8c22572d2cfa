import { availableParallelism } from 'node:os';
import type { AgentReply } from '@troupe/supervisor';
import { countErrors, type Inspection } from '../../agents/analyst.js';
import { coordinator } from '../../agents/coordinator.js';
import { BareThreads } from '../BareThreads.js';
import { demoScope } from '../demoScope.js';
import { type LoopCost, measureLoop } from '../measureLoop.js';
import { formatBytes, formatDuration, type Narrator } from '../Narrator.js';
import { collect } from '../nextEvent.js';
import { reportsOf } from '../reportsOf.js';
import type { Stage } from '../Stage.js';
import { fig } from '../wrapText.js';

const SERVICES = ['checkout', 'search', 'billing', 'payments'];

const times = (x: number): string => `${x.toFixed(2)}×`;

interface Round {
  readonly loop: LoopCost<number[]>;
  readonly fanned: LoopCost<AgentReply>;
  readonly bareMs: number;
  readonly speedup: number;
  readonly bareSpeedup: number;
}

/** Whether a round shows what Troupe claims: see the check in {@link fanOut}. */
const holds = (r: Round): boolean => r.speedup >= 0.6 * r.bareSpeedup && (r.bareSpeedup < 1.4 || r.speedup >= 1.25);

/**
 * One round: the calls on this event loop, then through `agentId` on the
 * pool, then on bare threads, back to back (the machine's load changes by
 * the second; each round's three figures are taken within about a second).
 */
async function round(stage: Stage, bare: BareThreads, agentId: string): Promise<Round> {
  const { out, supervisor } = stage;
  stage.tree.caption = `one event loop: ${SERVICES.length} calls running on this thread…`;
  await out.drain();
  // A frame with the caption is on the screen before the loop is held.
  await out.pause(150);
  const loop = await measureLoop(() => Promise.all(SERVICES.map(async (s) => countErrors(s))));
  stage.tree.caption = undefined;
  const agent = await supervisor.startAgent(coordinator, {
    agentId,
    conversationId: stage.run,
    scope: demoScope,
    toolContext: { requestId: 'req-1001', region: 'eu-west-1' },
    metadata: { incident: 'INC-7' },
  });
  const fanned = await measureLoop(() => agent.send(SERVICES.map((s) => `analyst: ${s}`).join('\n')));
  const bareMs = await bare.run(SERVICES);
  return { loop, fanned, bareMs, speedup: loop.wallMs / fanned.wallMs, bareSpeedup: loop.wallMs / bareMs };
}

/**
 * The same four CPU-bound tool calls three ways: on this thread's event loop
 * (where single-threaded frameworks run tools: `Promise.all` of synchronous
 * work is serial, and the loop is held throughout), delegated by a parent
 * agent to four subagents on the pool's worker threads, and on bare worker
 * threads (the yardstick: what the cores give right now). A round another
 * process disturbed is measured once more, and both are shown.
 */
export async function fanOut(stage: Stage): Promise<void> {
  const tour: Narrator = stage.tour;
  const { out, supervisor, threads } = stage;
  const cores = availableParallelism();
  const ideal = Math.min(threads, cores, SERVICES.length);
  stage.begin(
    `1. Fan-out: ${SERVICES.length} CPU-bound tool calls on ${threads} worker threads, against one event loop`,
  );
  const bare = await BareThreads.start(threads);
  try {
    tour.say(`Each call counts errors in a synthetic log (${SERVICES.length} services; no await inside).`);
    tour.note(
      out.live
        ? "First on this thread's event loop, as a single-threaded framework runs tools: the screen freezes, since nothing else can run."
        : "First on this thread's event loop, as a single-threaded framework runs tools.",
    );
    const spawned = collect(supervisor, 'subagent.spawned');
    const first = await round(stage, bare, 'triage');
    spawned.stop();
    let last = first;
    const rounds = [first];
    if (!holds(first)) {
      // Another process took the cores during one of the three runs: the figures do not compare.
      last = await round(stage, bare, 'triage-again');
      rounds.push(last);
    }
    await stage.showTree();
    const { loop, fanned } = first;
    tour.say(
      `one event loop: ${fig(formatDuration(loop.wallMs))}; the loop was held for ${fig(formatDuration(loop.maxDelayMs))} at a stretch`,
    );

    const reply = fanned.value;
    const reports = reportsOf(reply);
    tour.check(
      reports.length === SERVICES.length && reports.every((r) => 'ok' in r),
      `triage delegated ${SERVICES.length} tasks in one turn; all ${SERVICES.length} came back`,
      reply,
    );
    const seen = reports.map((r) => JSON.parse('ok' in r ? r.ok : '{}') as Inspection);
    const loopResults = loop.value;
    tour.check(
      seen.every((s, i) => s.errors === loopResults[i]),
      `the same results both ways: ${seen.map((s) => `${s.service} ${s.errors}`).join(', ')} errors`,
      { threads: seen.map((s) => s.errors), loop: loopResults },
    );
    for (const [i, r] of rounds.entries()) {
      tour.say(
        `${i === 0 ? '' : 'again: one event loop '}${i === 0 ? '' : `${formatDuration(r.loop.wallMs)}; `}${threads} worker threads: ${fig(formatDuration(r.fanned.wallMs))}, ${fig(times(r.speedup))} faster; bare worker threads (no Troupe): ${fig(times(r.bareSpeedup))}${i === 0 ? `; ${cores} cores allow at most ${times(ideal)}` : ''}`,
      );
      if (i === 0 && rounds.length > 1) {
        tour.note('Those do not compare (another process took the cores during one of them): measured again.');
      }
    }
    const { speedup, bareSpeedup } = last;
    // On a shared machine other processes take cores too: hold Troupe to
    // what bare threads got in the same round, and to a real speed-up only
    // when the machine had the cores to give one.
    const busy = bareSpeedup < 1.4;
    tour.check(
      holds(last),
      busy
        ? `Troupe's threads got ${fig(times(speedup))} where bare threads got ${times(bareSpeedup)}: the machine is busy (other processes hold its cores), so no speed-up is claimed this run`
        : `the fan-out ran ${fig(times(speedup))} faster than one event loop: ${fig(`${Math.round((100 * speedup) / bareSpeedup)}%`)} of what bare threads got, ${Math.round((100 * speedup) / ideal)}% of the ${times(ideal)} that ${ideal} cores can give`,
      rounds.map((r) => ({ loopMs: r.loop.wallMs, threadsMs: r.fanned.wallMs, bareMs: r.bareMs })),
    );
    tour.record(
      'fan-out speed-up',
      times(speedup),
      `${SERVICES.length} CPU-bound calls, ${threads} threads vs one loop (bare: ${times(bareSpeedup)}, max ${times(ideal)})`,
    );
    tour.check(
      fanned.maxDelayMs < loop.maxDelayMs / 2,
      `meanwhile the supervisor's event loop was never held more than ${fig(formatDuration(fanned.maxDelayMs))} (one event loop: ${formatDuration(loop.maxDelayMs)})`,
      { threads: fanned.maxDelayMs, loop: loop.maxDelayMs },
    );
    tour.record(
      'event loop held',
      formatDuration(fanned.maxDelayMs),
      `at most, during the fan-out (${formatDuration(loop.maxDelayMs)} on one loop)`,
    );
    tour.check(
      seen.every((s, i) => s.agentId === `triage-sub-${i + 1}` && s.parentAgentId === 'triage'),
      'child ids derive from the parent (triage-sub-<n>) and each knows its parent',
      seen.map((s) => [s.agentId, s.parentAgentId]),
    );
    const threadIds = new Set(seen.map((s) => s.threadId));
    // Peak overlap of the tools' [start, end] intervals, in the clock base every thread shares.
    const peak = Math.max(
      ...seen.map((a) => seen.filter((b) => b.startedAt <= a.startedAt && a.startedAt < b.endedAt).length),
    );
    tour.check(
      !threadIds.has(0) && threadIds.size === threads && peak === threads,
      `the tools ran ${peak} at a time on worker threads ${[...threadIds].sort().join(' and ')}, never on the supervisor's thread (id 0)`,
      { threads: [...threadIds], peak },
    );
    tour.check(
      seen.every(
        (s) =>
          s.tenantId === 'acme' && s.region === 'eu-west-1' && s.requestId === 'req-1001' && s.incident === 'INC-7',
      ),
      'each child saw ctx.scope.tenantId, the flat key ctx.region, ctx.toolContext.requestId and ctx.state.metadata.incident',
      seen,
    );
    const bytes = spawned.filter((e) => e.parentAgentId === 'triage').map((e) => e.bytes);
    const copied = bytes[0];
    tour.check(
      copied !== undefined &&
        bytes.length === SERVICES.length &&
        bytes.every((b) => b.total === b.scope + b.toolContext + b.metadata),
      `copied per spawn: scope ${formatBytes(copied?.scope ?? 0)} + toolContext ${formatBytes(copied?.toolContext ?? 0)} + metadata ${formatBytes(copied?.metadata ?? 0)} = ${fig(formatBytes(copied?.total ?? 0))}`,
      bytes,
    );
    const metadata = supervisor.agent('triage')?.snapshot().metadata ?? {};
    const findings = (metadata.findings ?? []) as readonly { service: string; errors: number }[];
    tour.check(
      metadata.incident === 'INC-7' &&
        findings.length === SERVICES.length &&
        findings.every((f, i) => f.service === seen[i]?.service && f.errors === seen[i]?.errors),
      `the analysts' ContextUpdates merged back into triage's metadata: findings[${findings.length}]`,
      metadata,
    );
  } finally {
    await bare.close();
  }
  await stage.end();
}
