import { performance } from 'node:perf_hooks';
import { isTroupeError } from '@troupe/core';
import { coordinator } from '../../agents/coordinator.js';
import { createProbe, Probe } from '../../agents/probe.js';
import { demoScope } from '../demoScope.js';
import { formatDuration, type Narrator } from '../Narrator.js';
import { collect } from '../nextEvent.js';
import { reportsOf } from '../reportsOf.js';
import type { Stage } from '../Stage.js';
import { fig } from '../wrapText.js';

/** An environment a person may type. */
export const ENVIRONMENT = /^[a-z][a-z0-9-]{0,19}$/;

/** How long the demo "thinks" when it answers for a person: on a terminal, long enough to watch the pool idle. */
const AUTO_THINK_MS = { live: 1200, plain: 300 };

/**
 * A subagent's tool asks a person. The run suspends and its worker is
 * freed: while the person thinks, the pool is sampled — no thread is held
 * and nothing runs. The answer resumes the same child on any worker.
 */
export async function question(stage: Stage): Promise<void> {
  const tour: Narrator = stage.tour;
  const { supervisor, out, person } = stage;
  stage.begin('4. A question that holds no worker while a person thinks');
  const probe = createProbe();
  const spawned = collect(supervisor, 'subagent.spawned');
  const release = await supervisor.startAgent(coordinator, {
    agentId: 'release',
    conversationId: stage.run,
    scope: demoScope,
    toolContext: { requestId: 'req-release', probe },
  });
  const reply = await release.send('deployer: checkout-api');
  const prompt = reply.status === 'suspended' ? reply.request.prompt : '';
  // Sample the pool the whole time the question is open.
  const samples: { running: number; threads: number; completed: number }[] = [];
  const sample = (): void => {
    const p = supervisor.stats().pool;
    samples.push({ running: p.running, threads: p.threads, completed: p.completed });
  };
  sample();
  const stats = supervisor.stats();
  const openedAt = performance.now();
  const sampler = setInterval(sample, 20);
  let answer: Awaited<ReturnType<typeof person.ask>>;
  try {
    stage.tree.caption = 'waiting for a person; the pool has nothing to run';
    if (!person.interactive) {
      // Not out.pause: plain mode thinks too, so the samples cover a real interval.
      await new Promise((resolve) => setTimeout(resolve, out.live ? AUTO_THINK_MS.live : AUTO_THINK_MS.plain));
    }
    answer = await person.ask(prompt, 'staging', (a) => ENVIRONMENT.test(a));
  } finally {
    clearInterval(sampler);
  }
  sample();
  const openMs = performance.now() - openedAt;
  tour.check(
    reply.status === 'suspended' && reply.path.join(' > ') === 'release > release-sub-1',
    `the question reached the host with its path release > release-sub-1, as soon as it was asked`,
    reply,
  );
  const held = Math.max(...samples.map((s) => s.running));
  const ran = (samples.at(-1)?.completed ?? 0) - (samples[0]?.completed ?? 0);
  tour.check(
    held === 0 && ran === 0 && stats.pendingRequests === 1 && stats.suspendedSubagents === 1,
    `for the ${fig(formatDuration(openMs))} it was open, ${samples.length} samples of the pool: ${fig('0 runs active')}, so all ${samples[0]?.threads} threads free, nothing ran; 1 pending request, 1 suspended subagent kept as state`,
    { samples: samples.length, held, ran, stats },
  );
  tour.record(
    'threads held by a question',
    `0 of ${samples[0]?.threads}`,
    `while it was open (${formatDuration(openMs)}; ${samples.length} samples)`,
  );
  stage.follow();
  const requestId = supervisor.pendingRequests()[0]?.request.id ?? '';
  const resumed = await supervisor.answer(requestId, { ok: true, data: { env: answer.answer } });
  spawned.stop();
  await stage.showTree();
  const reports = reportsOf(resumed);
  const resumes = spawned.filter((e) => e.agentId === 'release-sub-1').map((e) => e.resumed);
  tour.check(
    reports[0] !== undefined &&
      'ok' in reports[0] &&
      reports[0].ok.includes(`deployed checkout-api to ${answer.answer}`),
    `supervisor.answer resumed the run on a worker: "deployed checkout-api to ${answer.answer}"`,
    reports,
  );
  tour.check(
    Atomics.load(probe, Probe.deployRuns) === 2 && resumes.join() === 'false,true',
    'the pending tool re-ran exactly once (2 runs: ask, answer) in the same child release-sub-1',
    { runs: Atomics.load(probe, Probe.deployRuns), resumes },
  );
  let again: unknown;
  try {
    await supervisor.answer(requestId, { ok: true, data: { env: 'prod' } });
  } catch (error) {
    again = error;
  }
  tour.check(
    isTroupeError(again, 'ERR_REQUEST_ALREADY_ANSWERED'),
    'a second answer is refused: ERR_REQUEST_ALREADY_ANSWERED',
    again,
  );
  await stage.end();
}
