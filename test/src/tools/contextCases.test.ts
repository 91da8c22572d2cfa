// The seed documents' behavioural cases (shared/seeds/), run against the public
// API with real worker threads. Each `describe` is one seed document; cases the
// rest of the suite already covers are listed in the report, not repeated here.
// Where Troupe deliberately differs, the test cites DESIGN.md and asserts
// Troupe's documented behaviour instead.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { isDeepStrictEqual } from 'node:util';
import {
  type AgentId,
  isTroupeError,
  reduceMetadata,
  type ToolExceptionEvent,
  type ToolStartEvent,
  type ToolStopEvent,
} from '@troupe/core';
import { scrub } from '@troupe/core/internal';
import {
  type AgentReply,
  createSupervisor,
  MemoryPersistence,
  type PersistenceAdapter,
  type SubagentOutcome,
  type Supervisor,
  type SupervisorEvents,
  type TurnBatch,
} from '@troupe/supervisor';
import {
  badAppend,
  budgeted,
  canceller,
  channelProbe,
  deployer,
  executor,
  fetcher,
  notebook,
  protectedWriter,
  Runs,
  seedLead,
  turnCanceller,
} from './contextAgents.js';

const scope = Object.freeze({ userId: 'u-seed', orgId: 'org-7f3a9', role: 'member' });

function runsCounter(): Int32Array {
  return new Int32Array(new SharedArrayBuffer(Runs.size * 4));
}

/** Collect every emission of one event. */
function collect<K extends keyof SupervisorEvents>(supervisor: Supervisor, name: K): SupervisorEvents[K][0][] {
  const seen: SupervisorEvents[K][0][] = [];
  supervisor.on(name as keyof SupervisorEvents, ((p: SupervisorEvents[K][0]) => seen.push(p)) as never);
  return seen;
}

function text(reply: AgentReply): string {
  assert.equal(reply.status, 'done', `expected done, got ${reply.status}`);
  return reply.status === 'done' ? reply.text : '';
}

/** A direct spawn's answer resolves with its SubagentOutcome (one result on every path). */
function result(outcome: SubagentOutcome): string {
  assert.equal(outcome.status, 'done', `expected done, got ${outcome.status}`);
  return outcome.status === 'done' ? outcome.result : '';
}

/** What `notebook`'s tools make of `{ notes: null, obsolete: 'x' }`. */
const NOTEBOOK_INITIAL = Object.freeze({ notes: null, obsolete: 'x' });
const NOTEBOOK_RESULT = {
  notes: ['a', 'b'],
  todos: [{ id: 'todo-1', text: 'buy milk', done: false }],
  counter: 2,
  settings: { theme: 'dark', font: { size: 12, family: 'mono' }, tags: ['z'] },
};

describe('seed 000 — nous ContextUpdate', () => {
  let supervisor: Supervisor;
  before(async () => {
    supervisor = createSupervisor({ pool: { threads: 1 } });
    await supervisor.pool.ready();
  });
  after(() => supervisor.destroy());

  it('the example tools (set, append onto nil, deep merge, delete, log_event) fold in order, in a worker, through the one reducer', async () => {
    const outcome = await supervisor.spawn(notebook, { input: 'go', scope, metadata: NOTEBOOK_INITIAL });
    assert.equal(outcome.status, 'done');
    if (outcome.status !== 'done') return;
    // What the last tool saw: every earlier turn's update applied, in call order.
    const seen = JSON.parse(outcome.result) as { metadata: unknown; messages: number };
    assert.deepEqual(seen.metadata, NOTEBOOK_RESULT);
    // The host folds the returned operations through the same reducer and gets the same metadata.
    assert.deepEqual(reduceMetadata(NOTEBOOK_INITIAL, outcome.updates), NOTEBOOK_RESULT);
    assert.equal(
      outcome.updates.some((op) => op.op === 'logEvent'),
      false,
      'log_event touches no metadata',
    );
    // log_event: in the session log, under the agent that recorded it.
    assert.deepEqual(
      outcome.events.map((e) => [e.type, e.data, e.agentId]),
      [['tool_call', { name: 'search' }, outcome.agentId]],
    );
  });

  it("a parent that merges its subagent's metadata folds the child's operations; the child's event lands in the log, not the transcript", async () => {
    const parent = await supervisor.startAgent(seedLead, { scope, metadata: { ...NOTEBOOK_INITIAL, title: 't' } });
    const reply = await parent.send('notes please');
    text(reply);
    const snapshot = parent.snapshot();
    assert.deepEqual(snapshot.metadata, { ...NOTEBOOK_RESULT, title: 't' });
    assert.deepEqual(
      snapshot.events.map((e) => [e.type, e.data, e.agentId]),
      [['tool_call', { name: 'search' }, `${parent.id}-sub-1`]],
    );
    // ctx.messages is untouched by a bookkeeping event: the parent's transcript is
    // its user message, its task call, the task's result and its answer — nothing else.
    assert.deepEqual(
      snapshot.messages.filter((m) => m.role !== 'system').map((m) => m.role),
      ['user', 'assistant', 'tool', 'assistant'],
    );
    assert.equal(JSON.stringify(snapshot.messages).includes('tool_call'), false);
  });

  it('an update that cannot be applied (append to a non-list) is a typed error result and applies nothing of itself', async () => {
    const parent = await supervisor.startAgent(badAppend, { scope, metadata: { title: 'a string' } });
    const results = JSON.parse(text(await parent.send('go'))) as { error?: { code?: string; error?: string } }[];
    assert.equal(results[0]?.error?.code, 'ERR_CONTEXT_UPDATE');
    assert.match(String(results[0]?.error?.error), /append "title".*not a list/);
    // The `set('mine', ...)` earlier in the same update is not applied either.
    assert.deepEqual(parent.snapshot().metadata, { title: 'a string' });
  });
  // Troupe refuses a protected key where the update is built (DESIGN §2: "Protected keys cannot be
  // set, merged or deleted by a tool"); a hand-built operation on one is dropped with an event
  // (runTree.test.ts, case 10). The builder's refusal is a misuse of the API: the model sees it as
  // a typed error result and the tool is not retried (its side effects ran once).
  it('a protected key given to the builder is refused there: a typed error result the model sees, the tool runs once, nothing applies', async () => {
    const runs = runsCounter();
    const parent = await supervisor.startAgent(protectedWriter, { scope, toolContext: { runs } });
    const [result] = JSON.parse(text(await parent.send('go'))) as { error?: { code?: string; error?: string } }[];
    assert.equal(result?.error?.code, 'ERR_PROTECTED_KEY');
    assert.match(
      String(result?.error?.error),
      /set "troupe\.owned": keys starting with "troupe\." are owned by Troupe/,
    );
    assert.equal(Atomics.load(runs, Runs.protectedKey), 1, 'not retried');
    assert.deepEqual(parent.snapshot().metadata, {});
  });
});

describe('seed 001 — nous ToolExecutor', () => {
  let supervisor: Supervisor;
  before(async () => {
    supervisor = createSupervisor({ pool: { threads: 1 } });
    await supervisor.pool.ready();
  });
  after(() => supervisor.destroy());

  it('in a worker: a throw is retried (default retries 1), an error result is not; telemetry carries the raw reason, scrub drops it', async () => {
    const runs = runsCounter();
    const starts = collect(supervisor, 'tool.execute.start');
    const stops = collect(supervisor, 'tool.execute.stop');
    const exceptions = collect(supervisor, 'tool.execute.exception');
    const outcome = await supervisor.spawn(executor, { input: 'go', scope, toolContext: { runs } });
    assert.equal(outcome.status, 'done');
    if (outcome.status !== 'done') return;
    const [flaky, refuses, leaky] = JSON.parse(outcome.result) as [
      string,
      { error: { error: string; code?: string } },
      { error: { error: string } },
    ];
    assert.equal(flaky, 'ok on attempt 2');
    assert.deepEqual(refuses, { error: { error: 'no such record', code: 'ERR_TOOL_FAILED' } });
    assert.match(leaky.error.error, /sk-seed-secret-123/);
    assert.equal(Atomics.load(runs, Runs.flaky), 2, 'a thrown error is retried once by default');
    assert.equal(Atomics.load(runs, Runs.refuses), 1, 'a returned error result is never retried');
    assert.equal(Atomics.load(runs, Runs.leaky), 1, 'retries: 0 makes one attempt');

    const mine = <E extends { agentId: AgentId }>(events: E[]) => events.filter((e) => e.agentId === outcome.agentId);
    const startsOf = (name: string) =>
      mine<ToolStartEvent>(starts)
        .filter((e) => e.toolName === name)
        .map((e) => e.attempt);
    assert.deepEqual(startsOf('flaky'), [1, 2]);
    assert.deepEqual(startsOf('refuses'), [1]);
    assert.deepEqual(
      mine<ToolStopEvent>(stops)
        .map((e) => [e.toolName, e.status, e.attempt])
        .sort(),
      [
        ['flaky', 'ok', 2],
        ['leaky', 'error', 1],
        ['refuses', 'error', 1],
      ],
    );
    const ex = mine<ToolExceptionEvent>(exceptions);
    assert.deepEqual(ex.map((e) => [e.toolName, e.attempt, e.kind, e.willRetry]).sort(), [
      ['flaky', 1, 'thrown', true],
      ['leaky', 1, 'thrown', false],
      ['refuses', 1, 'returned', false],
    ]);
    const leak = ex.find((e) => e.toolName === 'leaky') as ToolExceptionEvent;
    // The raw reason and stack, unredacted, for trusted in-process handlers…
    assert.match(String((leak.reason as { message?: unknown }).message), /sk-seed-secret-123/);
    assert.equal(typeof leak.stack, 'string');
    // …and a scrub helper for exporters.
    const scrubbed = scrub(leak);
    assert.equal(scrubbed.reason, undefined);
    assert.equal(scrubbed.stack, undefined);
    assert.equal(JSON.stringify(scrubbed).includes('sk-seed-secret-123'), false);
  });
});

/** A MemoryPersistence whose every call is recorded, name and arguments. */
function recordingStore(): { store: PersistenceAdapter; calls: { name: string; args: unknown[] }[] } {
  const target = new MemoryPersistence();
  const calls: { name: string; args: unknown[] }[] = [];
  const store = new Proxy(target, {
    get(t, key) {
      const value = Reflect.get(t, key, t) as unknown;
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        calls.push({ name: String(key), args });
        return (value as (...a: unknown[]) => unknown).apply(t, args);
      };
    },
  });
  return { store, calls };
}

/** The adapter callbacks whose first argument is the scope. */
const SCOPE_FIRST = new Set([
  'persistState',
  'loadState',
  'saveMessage',
  'loadMessages',
  'commit',
  'loadRuns',
  'getRun',
  'startToolCalls',
  'loadToolCalls',
  'openRequest',
  'answerRequest',
  'withdrawRequest',
  'getRequest',
  'listRequests',
  'listConversations',
  'deleteConversation',
  'release',
]);

describe('seed 002 — sagents: the three context channels', () => {
  it("a subagent's tool sees scope at ctx.scope, toolContext flat and whole (frozen, read-only, scope key overridden), metadata under state", async (t) => {
    const supervisor = createSupervisor({ pool: { threads: 1 } });
    t.after(() => supervisor.destroy());
    const outcome = await supervisor.spawn(channelProbe, {
      input: 'probe',
      scope,
      // A reserved key its tools do not declare (so the types refuse the literal as it is): overridden.
      toolContext: { featureFlags: { newSearch: true }, tenantName: 'Acme', scope: 'an impostor' } as object,
      metadata: { conversation_title: 'My Chat' },
    });
    assert.equal(outcome.status, 'done');
    const [seen] = JSON.parse(outcome.status === 'done' ? outcome.result : '[]') as Record<string, unknown>[];
    assert.deepEqual(seen, {
      scope,
      featureFlags: { newSearch: true },
      tenantName: 'Acme',
      toolContextFrozen: true,
      writeRefused: true,
      tenantNameAfter: 'Acme',
      title: 'My Chat',
    });
  });

  it('every persistence callback gets the scope first — for the parent and its subagents, requests included — and no callback is given the scope in its data', async (t) => {
    const { store, calls } = recordingStore();
    const supervisor = createSupervisor({ pool: { threads: 1 }, persistence: store });
    t.after(() => supervisor.destroy());
    const notes = await supervisor.startAgent(seedLead, { scope });
    text(await notes.send('notes please'));
    const deploys = await supervisor.startAgent(seedLead, { scope, toolContext: { runs: runsCounter() } });
    const suspended = await deploys.send('deploy please');
    assert.equal(suspended.status, 'suspended');
    if (suspended.status !== 'suspended') return;
    assert.match(
      text(await supervisor.answer(suspended.request.id, { ok: true, data: { env: 'staging' } })),
      /staging/,
    );

    const names = new Set(calls.map((c) => c.name));
    const called = [...names].join(', ');
    assert.ok(names.has('loadState'), `the conversation is loaded (called: ${called})`);
    assert.ok(names.has('persistState') || names.has('commit'), `state is saved (called: ${called})`);
    assert.ok(names.has('answerRequest'), `the answer is taken by the store (called: ${called})`);
    // What was written under that scope includes a subagent's run and the request it opened.
    const batches = calls.filter((c) => c.name === 'commit').map((c) => c.args[1] as TurnBatch);
    const childRuns = batches.flatMap((b) => b.runs ?? []).filter((r) => r.agentId === `${deploys.id}-sub-1`);
    assert.ok(childRuns.length > 0, "the subagent's run is saved through a scope-first callback");
    assert.ok(
      batches.some((b) => (b.openedRequests ?? []).length > 0) || names.has('openRequest'),
      'the request is saved through a scope-first callback',
    );
    let checked = 0;
    for (const call of calls) {
      if (!SCOPE_FIRST.has(call.name)) continue;
      checked++;
      assert.ok(isDeepStrictEqual(call.args[0], scope), `${call.name} got the scope as its first argument`);
      // The scope's values never travel in what is saved (the scope is never persisted).
      let rest: string;
      try {
        rest = JSON.stringify(call.args.slice(1)) ?? '';
      } catch {
        rest = '';
      }
      assert.equal(rest.includes(scope.orgId), false, `${call.name} was given no scope value to store`);
    }
    assert.ok(checked >= 4, `${checked} scope-first calls checked`);
  });
});

describe('seed 004 — toolnexus ToolContext', () => {
  let supervisor: Supervisor;
  before(async () => {
    supervisor = createSupervisor({ pool: { threads: 1 } });
    await supervisor.pool.ready();
  });
  after(() => supervisor.destroy());

  it('example 3: pending frees the worker; the answer (echoing the request id) re-runs the tool exactly once with ctx.answer', async () => {
    const runs = runsCounter();
    const opened = collect(supervisor, 'request.opened');
    const outcome = await supervisor.spawn(deployer, { input: 'deploy', scope, toolContext: { runs } });
    assert.equal(outcome.status, 'suspended');
    if (outcome.status !== 'suspended') return;
    assert.equal(outcome.request.kind, 'input');
    assert.equal(outcome.request.prompt, 'Which environment?');
    assert.deepEqual(
      opened.map((e) => e.request.id),
      [outcome.request.id],
    );
    assert.equal(supervisor.stats().pool.running, 0, 'nothing runs while a person thinks');
    assert.equal(Atomics.load(runs, Runs.deploy), 1);
    // An answer naming another request is refused and leaves this one open.
    await assert.rejects(supervisor.answer(outcome.request.id, { id: 'req_someone_else', ok: true }), (e) =>
      isTroupeError(e, 'ERR_INVALID_ARGUMENT'),
    );
    assert.equal(supervisor.pendingRequests().length, 1);

    const reply = await supervisor.answer<SubagentOutcome>(outcome.request.id, { ok: true, data: { env: 'staging' } });
    assert.deepEqual(JSON.parse(result(reply)), ['deployed to staging']);
    assert.equal(Atomics.load(runs, Runs.deploy), 2, 'the pending tool re-ran exactly once');
    await assert.rejects(supervisor.answer(outcome.request.id, { ok: true }), (e) =>
      isTroupeError(e, 'ERR_REQUEST_ALREADY_ANSWERED'),
    );
  });

  it('a declined answer is a normal outcome: an error result the model sees, the run goes on (DESIGN §6: Troupe gives the result without re-running the tool)', async () => {
    // toolnexus re-runs the tool with `answer.ok === false` and the tool writes the
    // error itself. DESIGN.md line 112 ("a declined or expired answer becomes an
    // error result") and README ("becomes an error result instead") make Troupe
    // write it: the tool is not re-run, the model sees ERR_REQUEST_DECLINED with the reason.
    const runs = runsCounter();
    const answered = collect(supervisor, 'request.answered');
    const outcome = await supervisor.spawn(deployer, { input: 'deploy', scope, toolContext: { runs } });
    assert.equal(outcome.status, 'suspended');
    if (outcome.status !== 'suspended') return;
    const reply = await supervisor.answer<SubagentOutcome>(outcome.request.id, { ok: false, reason: 'change freeze' });
    const [declined] = JSON.parse(result(reply)) as [{ error: { error: string; code: string } }];
    assert.equal(declined.error.code, 'ERR_REQUEST_DECLINED');
    assert.match(declined.error.error, /declined: change freeze/);
    assert.equal(Atomics.load(runs, Runs.deploy), 1, 'a declined answer does not re-run the tool (Troupe)');
    assert.deepEqual(
      answered.filter((e) => e.requestId === outcome.request.id).map((e) => e.ok),
      [false],
    );
  });

  it('kind "authorization": an answer without data re-runs the real work once', async () => {
    const runs = runsCounter();
    const outcome = await supervisor.spawn(fetcher, { input: 'fetch', scope, toolContext: { runs } });
    assert.equal(outcome.status, 'suspended');
    if (outcome.status !== 'suspended') return;
    assert.equal(outcome.request.kind, 'authorization');
    const reply = await supervisor.answer<SubagentOutcome>(outcome.request.id, { ok: true });
    assert.deepEqual(JSON.parse(result(reply)), ['fetched with a valid session (answer ok: true, data: none)']);
    assert.equal(Atomics.load(runs, Runs.login), 2);
  });

  it("example 2: timeoutMs is this call's budget, unset when the tool has none (the tool falls back to its own default)", async () => {
    const outcome = await supervisor.spawn(budgeted, { input: 'go', scope });
    assert.equal(outcome.status, 'done');
    assert.deepEqual(JSON.parse(outcome.status === 'done' ? outcome.result : '[]'), [
      'within 5000ms',
      'within 30000ms',
    ]);
  });

  it('"cancel() is on the context so a tool can also cancel its own subtree": in a worker, isCancelled() flips at once and the run ends cancelled', async () => {
    const runs = runsCounter();
    const outcome = await supervisor.spawn(canceller, { input: 'go', scope, toolContext: { runs } });
    assert.equal(Atomics.load(runs, Runs.cancelBefore), 1, 'live before');
    assert.equal(Atomics.load(runs, Runs.cancelAfter), 2, 'cancelled right after ctx.cancel()');
    assert.equal(Atomics.load(runs, Runs.badReason), 1, 'a reason that is not a CancelReason is refused');
    assert.equal(Atomics.load(runs, Runs.selfCancel), 1, 'the tool ran once');
    assert.equal(outcome.status, 'cancelled');
    assert.equal(outcome.status === 'cancelled' ? outcome.reason : undefined, 'user');
  });

  it("a parent's tool that calls ctx.cancel() cancels its message and the subagent it delegated to", async () => {
    const runs = runsCounter();
    const cancelled = collect(supervisor, 'subagent.cancelled');
    const parent = await supervisor.startAgent(turnCanceller, { scope, toolContext: { runs } });
    const reply = await parent.send('go');
    assert.equal(reply.status, 'cancelled');
    assert.equal(reply.status === 'cancelled' ? reply.reason : undefined, 'user');
    const child = cancelled.filter((e) => e.parentAgentId === parent.id);
    assert.equal(child.length, 1, 'its subagent ended cancelled before the reply');
    assert.equal(child[0]?.reason, 'parent', 'pushed down from the cancelled message');
    assert.equal(parent.status, 'idle');
  });
});
