// `pnpm demo`: a tour of Troupe in a few seconds. Everything is real — a
// supervisor, worker threads, shared-memory cancellation — except the models,
// which are scripts (no network, no API keys) unless TROUPE_MODEL_BASE_URL names
// a real one (see agents/model.ts). Figures are measured on the spot; every ✓
// line is checked, and the process exits 1 if one does not hold.
import { performance } from 'node:perf_hooks';
import { isMainThread } from 'node:worker_threads';
import {
  type ApprovalDecision,
  type ApprovalHandler,
  isTroupeError,
  serializedSize,
  ToolTimeoutError,
} from '@troupe/core';
import { createSupervisor, type Supervisor, type SupervisorEvents } from '@troupe/supervisor';
import type { Inspection } from './agents/analyst.js';
import { coordinator, type TaskReport } from './agents/coordinator.js';
import { CRUNCH_TIMEOUT_MS } from './agents/cpu.js';
import { echo } from './agents/echo.js';
import { createProbe, Probe, sharedNow, stampOf } from './agents/probe.js';
import { checkModel } from './demo/modelCheck.js';
import { DemoFailure, formatBytes, formatDuration, Narrator } from './demo/Narrator.js';
import { startTracing, tracingMode } from './demo/tracing.js';
import { probeReached } from './demo/watchProbe.js';
import { TenantScope } from './scope.js';

const THREADS = 2;
// How long a cancelled run may take to stop before its worker is killed.
const GRACE_MS = 200;

const scope = {
  tenantId: 'acme',
  userId: 'u-42',
  role: 'oncall',
  permissions: ['deploy:checkout-api', 'refund:<=100'],
} as const;

/** Resolve with the next emission of `name` that passes `filter`. */
function nextEvent<K extends keyof SupervisorEvents>(
  supervisor: Supervisor,
  name: K,
  filter: (payload: SupervisorEvents[K][0]) => boolean = () => true,
): Promise<SupervisorEvents[K][0]> {
  return new Promise((resolve) => {
    const listener = (payload: SupervisorEvents[K][0]): void => {
      if (!filter(payload)) return;
      supervisor.off(name as keyof SupervisorEvents, listener as never);
      resolve(payload);
    };
    supervisor.on(name as keyof SupervisorEvents, listener as never);
  });
}

/** Every emission of `name` from now on. */
function collect<K extends keyof SupervisorEvents>(supervisor: Supervisor, name: K): SupervisorEvents[K][0][] {
  const seen: SupervisorEvents[K][0][] = [];
  supervisor.on(name as keyof SupervisorEvents, ((payload: SupervisorEvents[K][0]) => seen.push(payload)) as never);
  return seen;
}

/** The coordinator's answer: one report per delegated line. */
function reportsOf(reply: { readonly status: string; readonly text?: string }): TaskReport[] {
  return reply.status === 'done' && reply.text !== undefined ? (JSON.parse(reply.text) as TaskReport[]) : [];
}

/** The approval policy of the host, with a log of what it decided and where. */
function refundPolicy() {
  const decisions: { agentId: string; amount: number; decision: string; onMainThread: boolean }[] = [];
  const handler: ApprovalHandler = (request) => {
    const { order, amount } = request.arguments as { order: string; amount: number };
    const decision: ApprovalDecision =
      amount <= 100
        ? { decision: 'approve' }
        : amount > 10_000
          ? { decision: 'reject', reason: 'over the 10,000 limit' }
          : { decision: 'ask', prompt: `Refund ${amount} on order ${order}?` };
    decisions.push({ agentId: request.agentId, amount, decision: decision.decision, onMainThread: isMainThread });
    return decision;
  };
  return { handler, decisions };
}

async function leanAndHeavyScope(tour: Narrator, supervisor: Supervisor): Promise<void> {
  tour.scene('1. Scope: who the agents act for, checked at the edge');
  const lean = TenantScope.parse(scope);
  tour.check(
    Object.isFrozen(lean) && Object.isFrozen(lean.permissions),
    `lean scope {tenantId, userId, role, permissions[2]} parsed by zod, deep-frozen, ${formatBytes(serializedSize(lean))} of the ${formatBytes(TenantScope.budgetBytes)} budget`,
  );
  const heavy = {
    ...scope,
    permissions: Array.from({ length: 400 }, (_, i) => `repo:acme/service-${i}:write`),
  };
  const before = supervisor.stats();
  let refused: unknown;
  try {
    await supervisor.startAgent(coordinator, { scope: heavy, toolContext: { requestId: 'req-heavy' } });
  } catch (error) {
    refused = error;
  }
  const after = supervisor.stats();
  tour.check(
    isTroupeError(refused, 'ERR_SCOPE_OVER_BUDGET') &&
      after.agents === before.agents &&
      after.pool.completed === before.pool.completed,
    'heavy scope (400 permissions preloaded) refused before anything was spawned: ERR_SCOPE_OVER_BUDGET',
    refused,
  );
  tour.say(`"${(refused as Error).message}"`);
}

async function delegation(tour: Narrator, supervisor: Supervisor): Promise<void> {
  tour.scene('2. Delegation: a coordinator fans out to three analysts on worker threads');
  const spawned = collect(supervisor, 'subagent.spawned');
  const triage = await supervisor.startAgent(coordinator, {
    agentId: 'triage',
    scope,
    toolContext: { requestId: 'req-1001', region: 'eu-west-1' },
    metadata: { incident: 'INC-7' },
  });
  const reply = await triage.send('analyst: checkout\nanalyst: search\nanalyst: billing');
  const reports = reportsOf(reply);
  tour.check(
    reports.length === 3 && reports.every((r) => 'ok' in r),
    'triage delegated 3 tasks in one turn; all 3 came back',
    reply,
  );
  const seen = reports.map((r) => JSON.parse('ok' in r ? r.ok : '{}') as Inspection);
  for (const s of seen) {
    tour.say(
      `${s.agentId} on worker thread ${s.threadId}: ${s.service} has ${s.errors} errors (${formatDuration(s.endedAt - s.startedAt)})`,
    );
  }
  tour.check(
    seen.every((s, i) => s.agentId === `triage-sub-${i + 1}` && s.parentAgentId === 'triage'),
    'child ids derive from the parent (triage-sub-<n>) and each knows its parent',
    seen.map((s) => [s.agentId, s.parentAgentId]),
  );
  const threads = new Set(seen.map((s) => s.threadId));
  tour.check(
    !threads.has(0) && threads.size === THREADS,
    `the tools ran on ${threads.size} worker threads (ids ${[...threads].sort().join(', ')}), never on the supervisor thread (id 0)`,
    [...threads],
  );
  // Peak overlap of the tools' [start, end] intervals, taken in one clock base across threads.
  const peak = Math.max(
    ...seen.map((a) => seen.filter((b) => b.startedAt <= a.startedAt && a.startedAt < b.endedAt).length),
  );
  const busy = seen.reduce((sum, s) => sum + (s.endedAt - s.startedAt), 0);
  const wall = Math.max(...seen.map((s) => s.endedAt)) - Math.min(...seen.map((s) => s.startedAt));
  tour.say(`${peak} ran at once: ${formatDuration(busy)} of tool time in ${formatDuration(wall)}`);
  tour.check(
    seen.every(
      (s) => s.tenantId === 'acme' && s.region === 'eu-west-1' && s.requestId === 'req-1001' && s.incident === 'INC-7',
    ),
    'each child saw ctx.scope.tenantId, the flat key ctx.region, ctx.toolContext.requestId and ctx.state.metadata.incident',
    seen,
  );
  const bytes = spawned.filter((e) => e.parentAgentId === 'triage').map((e) => e.bytes);
  const first = bytes[0];
  tour.check(
    first !== undefined && bytes.length === 3 && bytes.every((b) => b.total === b.scope + b.toolContext + b.metadata),
    `copied per spawn (subagent.spawned): scope ${formatBytes(first?.scope ?? 0)} + toolContext ${formatBytes(first?.toolContext ?? 0)} + metadata ${formatBytes(first?.metadata ?? 0)} = ${formatBytes(first?.total ?? 0)}`,
    bytes,
  );
  const metadata = triage.snapshot().metadata;
  const findings = (metadata.findings ?? []) as readonly { service: string; errors: number }[];
  tour.check(
    metadata.incident === 'INC-7' &&
      findings.length === 3 &&
      findings.every((f, i) => f.service === seen[i]?.service && f.errors === seen[i]?.errors),
    `the analysts' ContextUpdates merged back into triage's metadata: findings = ${findings.map((f) => `${f.service}:${f.errors}`).join(', ')}`,
    metadata,
  );
}

async function runawayTool(tour: Narrator, supervisor: Supervisor): Promise<void> {
  tour.scene('3. A CPU-bound tool that never yields, stopped by its timeout');
  const probe = createProbe();
  const forms = await supervisor.startAgent(coordinator, {
    agentId: 'forms',
    scope,
    toolContext: { requestId: 'req-forms', probe },
  });
  const failed = nextEvent(supervisor, 'subagent.failed', (e) => e.parentAgentId === 'forms');
  const replied = forms.send('validator: check the signup form');
  await probeReached(probe, Probe.crunchStarted);
  const started = performance.now();
  const failure = await failed;
  const killedAfter = performance.now() - started;
  const error = failure.error;
  tour.say(`validate_input runs a backtracking regex (2^40 steps) inside one call: no await, no check`);
  tour.check(
    error instanceof ToolTimeoutError && error.forced && killedAfter >= CRUNCH_TIMEOUT_MS,
    `the watchdog killed its worker ${formatDuration(killedAfter)} after the tool started (timeoutMs ${CRUNCH_TIMEOUT_MS} + grace ${GRACE_MS}): ERR_TOOL_TIMEOUT, forced`,
    error,
  );
  const reports = reportsOf(await replied);
  tour.check(
    reports[0] !== undefined && 'error' in reports[0] && reports[0].error.code === 'ERR_TOOL_TIMEOUT',
    'the coordinator got an error result for that task (a timeout is terminal: never retried) and answered',
    reports,
  );
  const before = supervisor.stats().pool.completed;
  const t0 = performance.now();
  const next = reportsOf(await forms.send('analyst: checkout'));
  tour.check(
    next.length === 1 &&
      'ok' in (next[0] ?? {}) &&
      supervisor.stats().pool.completed === before + 1 &&
      supervisor.stats().pool.threads === THREADS,
    `the pool replaced the worker (${supervisor.stats().pool.threads} threads) and kept serving: the next task took ${formatDuration(performance.now() - t0)}`,
    next,
  );
}

/** Start a run whose tool spins politely, cancel its parent once the tool runs, and time both ends. */
async function cancelPoliteRun(supervisor: Supervisor, agentId: string) {
  const probe = createProbe();
  const math = await supervisor.startAgent(coordinator, {
    agentId,
    scope,
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

async function politeCancel(tour: Narrator, supervisor: Supervisor): Promise<void> {
  tour.scene('4. A CPU-bound tool that checks ctx.isCancelled(), stopped by a cancel');
  const runs = [];
  for (let i = 1; i <= 5; i++) runs.push(await cancelPoliteRun(supervisor, `math-${i}`));
  const median = (values: number[]): number => values.sort((a, b) => a - b)[values.length >> 1] ?? Number.NaN;
  const noticed = runs.map((r) => r.noticed);
  tour.say(
    `5 runs cancelled while their tool spun: cancel → the tool saw it in ${formatDuration(median(noticed))} (median; min ${formatDuration(Math.min(...noticed))}, max ${formatDuration(Math.max(...noticed))})`,
  );
  tour.say(
    "the parent's cancel is pushed down to its child's slot in shared memory; the tool's check is one Atomics.load",
  );
  tour.check(
    runs.every(
      (r) =>
        r.reply.status === 'cancelled' && r.reply.reason === 'user' && r.child.reason === 'parent' && !r.child.forced,
    ),
    `each parent ended cancelled (user), its child cancelled (parent) with forced: false: the tool stopped by itself, no worker was killed; cancel → reply ${formatDuration(median(runs.map((r) => r.settled)))} (median)`,
    runs.map((r) => [r.reply, r.child.reason, r.child.forced]),
  );
}

async function humanInTheLoop(tour: Narrator, supervisor: Supervisor): Promise<void> {
  tour.scene('5. Human in the loop: a subagent asks a question');
  const probe = createProbe();
  const spawned = collect(supervisor, 'subagent.spawned');
  const release = await supervisor.startAgent(coordinator, {
    agentId: 'release',
    scope,
    toolContext: { requestId: 'req-release', probe },
  });
  const reply = await release.send('deployer: checkout-api');
  tour.check(
    reply.status === 'suspended' && reply.path.join(' > ') === 'release > release-sub-1',
    `the request surfaced to the host with its path release > release-sub-1: "${reply.status === 'suspended' ? reply.request.prompt : ''}"`,
    reply,
  );
  const stats = supervisor.stats();
  tour.check(
    stats.pool.running === 0 && stats.pendingRequests === 1 && stats.suspendedSubagents === 1,
    'while a person thinks, no worker is held: 0 running, 1 pending request, 1 suspended subagent kept as state',
    stats,
  );
  const requestId = supervisor.pendingRequests()[0]?.request.id ?? '';
  const resumed = await supervisor.answer(requestId, { ok: true, data: { env: 'staging' } });
  const reports = reportsOf(resumed);
  const resumes = spawned.filter((e) => e.agentId === 'release-sub-1').map((e) => e.resumed);
  tour.check(
    reports[0] !== undefined && 'ok' in reports[0] && reports[0].ok.includes('deployed checkout-api to staging'),
    'supervisor.answer resumed the run on a worker: "deployed checkout-api to staging"',
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
}

async function approval(
  tour: Narrator,
  supervisor: Supervisor,
  policy: ReturnType<typeof refundPolicy>,
): Promise<void> {
  tour.scene('6. Approval: the host decides, on the supervisor thread');
  const probe = createProbe();
  const billing = await supervisor.startAgent(coordinator, {
    agentId: 'billing',
    scope,
    toolContext: { requestId: 'req-billing', probe },
  });
  const reply = await billing.send('refunds: A-1=40, A-2=2500, A-3=50000');
  const asked = policy.decisions.map((d) => `${d.amount} → ${d.decision}`).join(', ');
  tour.check(
    policy.decisions.length === 3 &&
      policy.decisions.every((d) => d.onMainThread && d.agentId === 'billing-sub-1') &&
      asked === '40 → approve, 2500 → ask, 50000 → reject',
    `the policy saw billing-sub-1's three refund calls on the supervisor thread: ${asked}`,
    policy.decisions,
  );
  tour.check(
    reply.status === 'suspended' && reply.request.kind === 'approval' && Atomics.load(probe, Probe.refundRuns) === 1,
    `"ask" became a request of kind approval ("${reply.status === 'suspended' ? reply.request.prompt : ''}"); so far only the approved refund ran`,
    { reply, runs: Atomics.load(probe, Probe.refundRuns) },
  );
  const done = await supervisor.answer(reply.status === 'suspended' ? reply.request.id : '', { ok: true });
  const [report] = reportsOf(done);
  const results = report !== undefined && 'ok' in report ? (JSON.parse(report.ok) as unknown[]) : [];
  tour.check(
    results[0] === 'refunded 40 on A-1' &&
      results[1] === 'refunded 2500 on A-2' &&
      (results[2] as { error?: { code?: string } } | undefined)?.error?.code === 'ERR_APPROVAL_DENIED' &&
      Atomics.load(probe, Probe.refundRuns) === 2,
    'a person said yes: A-2 ran once; A-3 never ran (ERR_APPROVAL_DENIED)',
    results,
  );
}

async function crash(tour: Narrator, supervisor: Supervisor): Promise<void> {
  tour.scene('7. A crash is contained');
  const crashed = nextEvent(supervisor, 'subagent.crashed', (e) => e.parentAgentId === 'reports');
  const reports = await supervisor.startAgent(coordinator, {
    agentId: 'reports',
    scope,
    toolContext: { requestId: 'req-reports' },
  });
  const reply = await reports.send('exporter: weekly\nanalyst: search');
  const event = await crashed;
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
}

async function close(tour: Narrator, supervisor: Supervisor): Promise<void> {
  tour.scene('8. close(): refuse new work, finish what runs, stop every worker');
  const late = await supervisor.startAgent(coordinator, {
    agentId: 'late',
    scope,
    toolContext: { requestId: 'req-late' },
  });
  const inFlight = late.send('analyst: billing');
  const t0 = performance.now();
  await supervisor.close({ timeoutMs: 2000 });
  const took = performance.now() - t0;
  const reply = await inFlight;
  let refused: unknown;
  try {
    await supervisor.startAgent(coordinator, { scope, toolContext: { requestId: 'req-closed' } });
  } catch (error) {
    refused = error;
  }
  const stats = supervisor.stats();
  tour.check(
    reply.status === 'done' && stats.pool.threads === 0 && stats.pool.running === 0,
    `close({ timeoutMs: 2000 }) let the in-flight message finish and resolved after every worker exited (${formatDuration(took)}, 0 threads)`,
    { reply, stats },
  );
  tour.check(isTroupeError(refused, 'ERR_CLOSED'), 'use after close fails loudly: ERR_CLOSED', refused);
}

async function main(): Promise<void> {
  const model = await checkModel();
  if (model.status === 'failed') {
    console.error(`   ✗ ${model.line}`);
    process.exitCode = 1;
    return;
  }
  const started = performance.now();
  const tour: Narrator = new Narrator();
  const policy = refundPolicy();
  const supervisor = createSupervisor({
    scope: TenantScope,
    pool: { threads: THREADS, graceMs: GRACE_MS },
    approval: policy.handler,
  });
  // Boot the pool: one run per thread, so no scene pays for a cold worker.
  await supervisor.pool.ready();
  await Promise.all(Array.from({ length: THREADS }, () => supervisor.spawn(echo, { input: 'warm up', scope })));
  console.log(
    `Troupe demo: a supervisor and ${THREADS} worker threads (booted in ${formatDuration(performance.now() - started)}); ${model.status === 'ready' ? `models: ${model.model} at ${model.baseURL}` : 'models are scripts, no network'}`,
  );
  // `--trace`: every scene in a span of its own, the supervisor's spans under it, the tree printed at the end.
  const mode = tracingMode();
  const tracing = mode === 'off' ? undefined : startTracing(supervisor, mode);
  const scene = (name: string, work: () => Promise<void>): Promise<void> =>
    tracing === undefined ? work() : tracing.scene(name, work);
  try {
    await scene('scene 1: scope', () => leanAndHeavyScope(tour, supervisor));
    await scene('scene 2: delegation', () => delegation(tour, supervisor));
    await scene('scene 3: runaway tool', () => runawayTool(tour, supervisor));
    await scene('scene 4: polite cancel', () => politeCancel(tour, supervisor));
    await scene('scene 5: human in the loop', () => humanInTheLoop(tour, supervisor));
    await scene('scene 6: approval', () => approval(tour, supervisor, policy));
    await scene('scene 7: crash', () => crash(tour, supervisor));
    await scene('scene 8: close', () => close(tour, supervisor));
    await tracing?.finish((line) => console.log(line));
  } catch (error) {
    // Tear down at once so a failing demo still exits, then say what broke.
    await supervisor.destroy();
    console.error(`\n   ✗ ${error instanceof DemoFailure ? error.message : (error as Error)?.stack}`);
    process.exitCode = 1;
    return;
  }
  console.log(`\n${tour.checks} claims checked in ${formatDuration(performance.now() - started)}.`);
}

await main();
