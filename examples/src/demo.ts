// `pnpm demo`: a tour of Troupe in well under a minute. Everything is real —
// a supervisor, worker threads, shared-memory cancellation, a SQLite file —
// except the models, which are scripts (no network, no API keys) unless
// TROUPE_MODEL_BASE_URL names a real one (see agents/model.ts): then the
// agents talk to it and the live-token scene streams its words. Figures are
// measured on the spot; every ✓ line is checked, and the process exits 1 if
// one does not hold. On a terminal: colour, a live tree of the agents, paced
// for a reader; elsewhere (a pipe, CI) plain lines. `pnpm demo --help`.
import { availableParallelism } from 'node:os';
import { performance } from 'node:perf_hooks';
import { sqlitePersistence } from '@troupe/sqlite';
import { createSupervisor } from '@troupe/supervisor';
import { coordinator } from './agents/coordinator.js';
import { counterReady } from './agents/counter.js';
import { AgentTree } from './demo/AgentTree.js';
import { DemoUsageError, parseDemoOptions, USAGE } from './demo/DemoOptions.js';
import { demoScope } from './demo/demoScope.js';
import { LiveOutput } from './demo/LiveOutput.js';
import { checkModel } from './demo/modelCheck.js';
import { DemoFailure, formatDuration, Narrator } from './demo/Narrator.js';
import type { Output } from './demo/Output.js';
import { DemoDirError, openDemoStore } from './demo/openDemoStore.js';
import { Person } from './demo/Person.js';
import { PlainOutput } from './demo/PlainOutput.js';
import { Stage } from './demo/Stage.js';
import { StallGuard } from './demo/StallGuard.js';
import { approval, refundPolicy } from './demo/scenes/approval.js';
import { closeDown } from './demo/scenes/closeDown.js';
import { crash } from './demo/scenes/crash.js';
import { durable } from './demo/scenes/durable.js';
import { fanOut } from './demo/scenes/fanOut.js';
import { liveTokens } from './demo/scenes/liveTokens.js';
import { politeCancel } from './demo/scenes/politeCancel.js';
import { question } from './demo/scenes/question.js';
import { runaway } from './demo/scenes/runaway.js';
import { scopeAtEdge } from './demo/scenes/scopeAtEdge.js';
import { startTracing, tracingMode } from './demo/tracing.js';
import { fig, fitText, unmarked, visibleLength, wrapText } from './demo/wrapText.js';
import { TenantScope } from './scope.js';

const THREADS = 2;
// How long a cancelled run may take to stop before its worker is killed.
const GRACE_MS = 200;

/** A message on stderr, its first line marked ✗; each line wrapped to 80 columns. */
function fail(text: string): void {
  const lines = text.split('\n').flatMap((line, i) => {
    const head = i === 0 ? '✗ ' : '';
    // A line that fits keeps its spacing (the usage is laid out by hand).
    return visibleLength(head + line) <= 80 ? [head + line] : wrapText(line, 80, head, i === 0 ? '  ' : '    ');
  });
  process.stderr.write(`${unmarked(lines.join('\n'))}\n`);
}

/** Delete this run's conversations (the scenes'), keeping the one the next run restores. */
async function forgetRun(dir: string, run: string): Promise<void> {
  const store = sqlitePersistence({ directory: dir });
  try {
    for (let after: string | undefined, first = true; first || after !== undefined; first = false) {
      const page = await store.listConversations(demoScope, after === undefined ? {} : { after });
      for (const c of page.items) {
        if (c.conversationId === run) {
          await store.deleteConversation(demoScope, { agentId: c.agentId, conversationId: c.conversationId });
        }
      }
      after = page.next;
    }
  } finally {
    await store.close();
  }
}

/**
 * Why a check fails on a real model, and what to do: appended to the failure
 * when the agents talk to one (on scripts, a failure is the demo's own).
 */
function realModelNote(model: { readonly model: string; readonly baseURL: string } | undefined): string {
  return model === undefined
    ? ''
    : `\nThe agents run on ${model.model} at ${model.baseURL} (TROUPE_MODEL_BASE_URL), which did not do what this scene's script needs: the delegating agents are told to hand each line "<subagent>: <task>" to that subagent with the task tool, and to answer with the JSON array of the results. The demo's claims hold only with a model that follows those instructions; unset TROUPE_MODEL_BASE_URL to run it on its scripts.`;
}

async function main(): Promise<number> {
  let options: ReturnType<typeof parseDemoOptions>;
  try {
    options = parseDemoOptions(process.argv.slice(2), process.env, {
      stdinIsTTY: process.stdin.isTTY === true,
      stdoutIsTTY: process.stdout.isTTY === true,
    });
  } catch (error) {
    fail(error instanceof DemoUsageError ? error.message : (error as Error).message);
    return 2;
  }
  if (options.help) {
    console.log(USAGE);
    return 0;
  }
  // A model named by the environment answers before anything runs, or the demo says in one line what to fix.
  const checked = await checkModel();
  if (checked.status === 'failed') {
    process.stderr.write(`✗ ${checked.line}\n`);
    return 1;
  }
  const model = checked.status === 'ready' ? checked : undefined;
  const started = performance.now();
  let opened: ReturnType<typeof openDemoStore>;
  try {
    opened = openDemoStore(
      options.dir,
      options.dirFrom === 'default' ? 'pass --dir <directory> or set TROUPE_DEMO_DIR' : `change ${options.dirFrom}`,
    );
  } catch (error) {
    fail(error instanceof DemoDirError ? error.message : String((error as Error)?.stack ?? error));
    return 2;
  }
  const out: Output = options.live
    ? new LiveOutput(process.stdout, { color: options.color })
    : new PlainOutput((text) => process.stdout.write(text));
  const tour = new Narrator(out);
  const policy = refundPolicy();
  const supervisor = createSupervisor({
    scope: TenantScope,
    pool: { threads: THREADS, graceMs: GRACE_MS },
    approval: policy.handler,
    persistence: opened.store,
    agents: [coordinator],
  });
  const run = `run-${Date.now().toString(36)}`;
  const stage = new Stage({
    supervisor,
    tour,
    out,
    tree: new AgentTree(supervisor),
    person: new Person(out, options),
    dir: options.dir,
    file: opened.file,
    existed: opened.existed,
    run,
    threads: THREADS,
  });
  // A scene that waits for what its agents never do fails, saying what (never a silent exit 13).
  const guard = new StallGuard(
    (name, waits) =>
      `${name} could not finish: its next checks needed ${waits.length === 0 ? 'its agents to act' : waits.join('; ')} — none of it happened, and nothing else was left to run.`,
  );
  let interrupted = false;
  const onSigint = (): void => {
    interrupted = true;
    out.close();
    fail('interrupted: stopping the workers');
    void supervisor
      .destroy()
      .then(() => forgetRun(options.dir, run))
      .finally(() => process.exit(130));
  };
  process.once('SIGINT', onSigint);
  try {
    // Boot the pool: one run per thread, so no scene pays for a cold worker (nor the fan-out
    // for loading its module and the SDK the agents import).
    await supervisor.pool.ready();
    await Promise.all(
      Array.from({ length: THREADS }, () => supervisor.spawn(counterReady, { input: 'warm up', scope: demoScope })),
    );
    const s = out.style;
    out.print(
      ...wrapText(
        `${s.bold('Troupe demo')}: a supervisor and ${THREADS} worker threads on ${availableParallelism()} cores, booted in ${fig(formatDuration(performance.now() - started))}`,
        out.width,
      ),
      ...wrapText(
        model === undefined
          ? 'models: scripts (no network)'
          : `models: ${model.model} at ${model.baseURL} (the fan-out's and the validator's stay scripted)`,
        out.width,
      ),
      ...wrapText(`database: ${opened.file} (${opened.existed ? 'from an earlier run' : 'new'})`, out.width),
    );
    // `--trace`: every scene in a span of its own, the supervisor's spans under it, the tree printed at the end.
    const mode = tracingMode();
    const tracing = mode === undefined ? undefined : startTracing(supervisor, mode);
    const scene = (name: string, work: () => Promise<void>): Promise<void> =>
      guard.run(name, () => (tracing === undefined ? work() : tracing.scene(name, work)));
    await scene('scene 1: fan-out', () => fanOut(stage));
    await scene('scene 2: runaway tool', () => runaway(stage, GRACE_MS));
    await scene('scene 3: polite cancel', () => politeCancel(stage));
    await scene('scene 4: question', () => question(stage));
    await scene('scene 5: approval', () => approval(stage, policy));
    await scene('scene 6: durable state', () => durable(stage));
    await scene('scene 7: scope', () => scopeAtEdge(stage));
    await scene('scene 8: crash', () => crash(stage));
    const figures = tour.figures.map((f) => `${f.label}: ${f.value} (${f.note})`).join('\n');
    await scene('scene 9: live tokens', () => liveTokens(stage, model, figures));
    await scene('scene 10: close', () => closeDown(stage));
    tour.scene(`Measured on this machine just now (${tour.checks} claims checked):`);
    tour.summary();
    out.print('', `${tour.checks} claims checked in ${formatDuration(performance.now() - started)}.`);
    await out.drain();
    if (tracing !== undefined) {
      // Hundreds of lines for a developer: printed plain and at once, cut to 80 columns.
      out.close();
      await tracing.finish((line) => process.stdout.write(`${fitText(line, 80)}\n`));
    }
    return 0;
  } catch (error) {
    if (interrupted) return 130;
    // Tear down at once so a failing demo still exits, then say what broke.
    await supervisor.destroy();
    out.close();
    if ((error as { code?: unknown })?.code === 'SIGINT') return 130;
    fail(
      error instanceof DemoFailure
        ? `${error.message}${realModelNote(model)}`
        : `${String((error as Error)?.stack ?? error)}${realModelNote(model)}`,
    );
    return 1;
  } finally {
    guard.close();
    process.off('SIGINT', onSigint);
    out.close();
    if (!interrupted) await forgetRun(options.dir, run);
  }
}

// A reader that went away (`pnpm demo | head`) is not an error of the demo.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(0);
});
process.exitCode = await main();
