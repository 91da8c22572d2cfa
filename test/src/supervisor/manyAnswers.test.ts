// Issue 31, item 2: answering one of many questions cost time proportional to all of them (each
// answer re-walked every open call and resumed the run on its own). A turn whose tools open many
// questions — a parent's own, and a subagent's in a worker — answered all at once and one by one,
// with the memory store and with SQLite: every pending tool re-runs exactly once with its own
// answer (a declined or expired answer is that call's error result; a yes to an approval runs
// the call it was asked about, pre-approved), and answers given together are one resume of the
// run that asked, so the store is written its state a few times, not once per answer.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type { Answer } from '@troupe/core';
import { sqlitePersistence } from '@troupe/sqlite';
import {
  type AgentReply,
  createSupervisor,
  MemoryPersistence,
  type PersistenceAdapter,
  type Supervisor,
} from '@troupe/supervisor';
import { MAX_CALLS, type ManyPlan, manyAsker, manyDelegator, runCounters } from '../fixtures/agents/manyQuestions.js';
import { tempDir } from '../persistence/sqliteFiles.js';

const scope = { org: 'acme', userId: 'ada' };
const dirs: { remove(): void }[] = [];
after(() => {
  for (const d of dirs) d.remove();
});

/** The work a store is given, counted as it is given. */
interface Work {
  /** Batches carrying a whole state (a run's row with its state, or a conversation's envelope). */
  stateSaves: number;
  /** The pending calls those states held, summed: what writing the states cost, in calls. */
  pendingWritten: number;
  /** Loads of a conversation's runs (with their states). */
  loadRuns: number;
}

/** The store, its work counted (the store itself does it all). */
function counted(store: PersistenceAdapter, work: Work): PersistenceAdapter {
  const pendingOf = (state: unknown): number => {
    const pending = (state as { pending?: unknown } | undefined)?.pending;
    return Array.isArray(pending) ? pending.length : 0;
  };
  return new Proxy(store, {
    get(target, key) {
      const value: unknown = Reflect.get(target, key, target);
      if (typeof value !== 'function') return value;
      if (key === 'commit') {
        return (scope: unknown, batch: Parameters<PersistenceAdapter['commit']>[1], context: unknown) => {
          for (const run of batch.runs ?? []) {
            if (run.state === undefined) continue;
            work.stateSaves++;
            work.pendingWritten += pendingOf(run.state);
          }
          if (batch.envelope !== undefined) {
            work.stateSaves++;
            work.pendingWritten += pendingOf(batch.envelope.state);
          }
          return (value as PersistenceAdapter['commit']).call(target, scope, batch, context as never);
        };
      }
      if (key === 'loadRuns') {
        return (...args: unknown[]) => {
          work.loadRuns++;
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      }
      return (value as (...a: unknown[]) => unknown).bind(target);
    },
  });
}

type Kind = 'memory' | 'sqlite';

interface Harness {
  readonly supervisor: Supervisor;
  readonly work: Work;
  readonly runs: Int32Array;
  /** Resumes of each run since the harness started, by agent id (a message's, a subagent's). */
  readonly resumes: Map<string, number>;
  /** Calls of the approval handler. */
  readonly asked: { count: number };
  reset(): void;
}

function harness(kind: Kind): Harness {
  const work: Work = { stateSaves: 0, pendingWritten: 0, loadRuns: 0 };
  let store: PersistenceAdapter;
  if (kind === 'memory') store = new MemoryPersistence();
  else {
    const d = tempDir('many-answers');
    dirs.push(d);
    store = sqlitePersistence({ file: join(d.dir, 'troupe.sqlite'), tenantKey: (s) => (s as { org: string }).org });
  }
  const asked = { count: 0 };
  const supervisor = createSupervisor({
    persistence: counted(store, work),
    pool: { threads: 2 },
    approval: () => {
      asked.count++;
      return { decision: 'ask', prompt: 'may it run?' };
    },
  });
  const resumes = new Map<string, number>();
  const resumed = (e: { agentId: string; resumed: boolean }) => {
    if (e.resumed) resumes.set(e.agentId, (resumes.get(e.agentId) ?? 0) + 1);
  };
  supervisor.on('agent.run.started', resumed);
  supervisor.on('subagent.spawned', resumed);
  return {
    supervisor,
    work,
    runs: runCounters(),
    resumes,
    asked,
    reset() {
      work.stateSaves = 0;
      work.pendingWritten = 0;
      work.loadRuns = 0;
      resumes.clear();
    },
  };
}

/** What a request is about: question `i` of the turn, or its approval-gated call `i`. */
function callOf(request: { kind: string; data?: unknown }): { approval: boolean; i: number } {
  if (request.kind === 'approval') {
    return { approval: true, i: (request.data as { arguments: { i: number } }).arguments.i };
  }
  return { approval: false, i: (request.data as { i: number }).i };
}

/** The answers a test gives: question i gets `a<i>` unless declined; approval i a yes unless refused. */
interface Choices {
  readonly declined: ReadonlySet<number>;
  readonly refused: ReadonlySet<number>;
}

function answerFor(request: { kind: string; data?: unknown }, c: Choices): Omit<Answer, 'id'> {
  const { approval, i } = callOf(request);
  if (approval) return c.refused.has(i) ? { ok: false, reason: 'no' } : { ok: true };
  return c.declined.has(i) ? { ok: false, reason: 'no' } : { ok: true, data: `a${i}` };
}

/** Every call got its own answer, and each tool ran as often as its answer says. */
function checkResults(h: Harness, plan: ManyPlan, c: Choices, text: string): void {
  const results = JSON.parse(text) as unknown[];
  const approvals = plan.approvals ?? 0;
  assert.equal(results.length, plan.asks + approvals);
  const expired = new Set(plan.expired ?? []);
  for (let i = 0; i < plan.asks; i++) {
    const want = expired.has(i)
      ? { code: 'ERR_REQUEST_EXPIRED' }
      : c.declined.has(i)
        ? { code: 'ERR_REQUEST_DECLINED' }
        : `${i}=a${i}`;
    assert.deepEqual(results[i], want, `question ${i}`);
    assert.equal(Atomics.load(h.runs, i), 1, `question ${i} was asked once`);
    const reran = typeof want === 'string' ? 1 : 0;
    assert.equal(Atomics.load(h.runs, MAX_CALLS + i), reran, `question ${i} re-ran ${reran} time(s) with its answer`);
  }
  for (let i = 0; i < approvals; i++) {
    const yes = !c.refused.has(i);
    assert.deepEqual(results[plan.asks + i], yes ? `guarded ${i}` : { code: 'ERR_APPROVAL_DENIED' }, `approval ${i}`);
    assert.equal(Atomics.load(h.runs, 2 * MAX_CALLS + i), yes ? 1 : 0, `approval ${i}: ran ${yes ? 'once' : 'never'}`);
  }
  // Each approval was asked of the handler once: a yes runs its call pre-approved, never asked again.
  assert.equal(h.asked.count, approvals);
}

function every(n: number, step: number, from = 0): Set<number> {
  const out = new Set<number>();
  for (let i = from; i < n; i += step) out.add(i);
  return out;
}

/** Start the agent and send the plan: its reply is a suspension with every question open. */
async function suspended(h: Harness, agent: typeof manyAsker, plan: ManyPlan) {
  const handle = await h.supervisor.startAgent(agent, { scope, toolContext: { runs: h.runs } });
  const first = await handle.send(JSON.stringify(plan));
  assert.equal(first.status, 'suspended', JSON.stringify(first));
  const open = h.supervisor.pendingRequests();
  assert.equal(open.length, plan.asks + (plan.approvals ?? 0), 'every question is open');
  return { handle, open };
}

/** All answers given together: one resume of the run that asked, every reply the final one. */
async function allAtOnce(h: Harness, agent: typeof manyAsker, plan: ManyPlan, c: Choices): Promise<AgentReply> {
  const { open } = await suspended(h, agent, plan);
  h.reset();
  const replies = await Promise.all(
    open.map((p) => h.supervisor.answer<AgentReply>(p.request.id, answerFor(p.request, c))),
  );
  const last = replies[replies.length - 1] as AgentReply;
  assert.equal(last.status, 'done', JSON.stringify(last).slice(0, 500));
  for (const r of replies)
    assert.equal(r.status, 'done', 'every answer resolves with the reply that ended the message');
  assert.equal(h.supervisor.pendingRequests().length, 0);
  return last;
}

/** Each answer given once the one before was replied to: the message suspends on the next until the last. */
async function oneByOne(h: Harness, agent: typeof manyAsker, plan: ManyPlan, c: Choices): Promise<AgentReply> {
  const { open } = await suspended(h, agent, plan);
  h.reset();
  // In call order: each reply names the first call still open.
  const position = (r: { kind: string; data?: unknown }) => {
    const { approval, i } = callOf(r);
    return approval ? plan.asks + i : i;
  };
  const inOrder = [...open].sort((a, b) => position(a.request) - position(b.request));
  let last: AgentReply | undefined;
  for (const [k, p] of inOrder.entries()) {
    last = await h.supervisor.answer<AgentReply>(p.request.id, answerFor(p.request, c));
    if (k < inOrder.length - 1) {
      assert.equal(last.status, 'suspended', `after answer ${k + 1} of ${inOrder.length}`);
      // It waits on the next question open, never on one answered already.
      assert.equal((last as { request: { id: string } }).request.id, inOrder[k + 1]?.request.id);
    }
  }
  assert.equal(last?.status, 'done', JSON.stringify(last).slice(0, 500));
  return last as AgentReply;
}

const textOf = (reply: AgentReply): string => (reply as { text: string }).text;

for (const kind of ['memory', 'sqlite'] as const) {
  describe(`many questions answered, ${kind} store`, () => {
    it('a parent’s own 1,000 questions and 50 approvals answered all at once: one resume; each call re-runs once with its own answer', async () => {
      const h = harness(kind);
      try {
        const plan: ManyPlan = { asks: 1000, expired: [3, 500, 999], approvals: 50 };
        const c: Choices = { declined: every(1000, 25, 7), refused: every(50, 10, 4) };
        const reply = await allAtOnce(h, manyAsker, plan, c);
        checkResults(h, plan, c, textOf(reply));
        assert.deepEqual([...h.resumes.values()], [1], 'the message resumed once for the 1,050 answers');
        // The message ended in that resume: its state was saved a few times (with a durable store,
        // once more as the answers claim the run's next attempt, one claim for all of them), never
        // with 1,050 open calls per answer.
        assert.ok(h.work.stateSaves <= 4, `${h.work.stateSaves} states saved`);
        assert.ok(h.work.pendingWritten <= 2 * 1050, `${h.work.pendingWritten} pending calls written`);
        // A durable store's check that no other process runs the conversation: once for the answers given together.
        assert.ok(h.work.loadRuns <= 1, `${h.work.loadRuns} loads of the conversation's runs`);
      } finally {
        await h.supervisor.close();
      }
    });

    it('a parent’s 25 questions and 5 approvals answered one by one: each reply names the next question; each call re-runs once', async () => {
      const h = harness(kind);
      try {
        const plan: ManyPlan = { asks: 25, expired: [11], approvals: 5 };
        const c: Choices = { declined: new Set([2, 20]), refused: new Set([1]) };
        const reply = await oneByOne(h, manyAsker, plan, c);
        checkResults(h, plan, c, textOf(reply));
        assert.deepEqual([...h.resumes.values()], [30], 'one resume per answer');
      } finally {
        await h.supervisor.close();
      }
    });

    it('a subagent’s 500 questions and 20 approvals (in a worker) answered all at once: the subagent resumes once, then its parent', async () => {
      const h = harness(kind);
      try {
        const plan: ManyPlan = { asks: 500, expired: [0, 250], approvals: 20 };
        const c: Choices = { declined: every(500, 50, 9), refused: every(20, 7, 3) };
        const reply = await allAtOnce(h, manyDelegator, plan, c);
        checkResults(h, plan, c, textOf(reply));
        const ids = [...h.resumes.keys()];
        assert.equal(ids.length, 2, JSON.stringify([...h.resumes]));
        assert.ok(
          ids.some((id) => id.endsWith('-sub-1')),
          'the subagent resumed',
        );
        assert.deepEqual(
          [...h.resumes.values()],
          [1, 1],
          'each once: the subagent with its 520 answers, then the message',
        );
        assert.ok(h.work.loadRuns <= 1, `${h.work.loadRuns} loads of the conversation's runs`);
      } finally {
        await h.supervisor.close();
      }
    });

    it('a subagent’s 12 questions and 3 approvals answered one by one: it resumes on a worker with each', async () => {
      const h = harness(kind);
      try {
        const plan: ManyPlan = { asks: 12, expired: [5], approvals: 3 };
        const c: Choices = { declined: new Set([0]), refused: new Set([2]) };
        const reply = await oneByOne(h, manyDelegator, plan, c);
        checkResults(h, plan, c, textOf(reply));
        const child = [...h.resumes].find(([id]) => id.endsWith('-sub-1'));
        assert.equal(child?.[1], 15, 'the subagent resumed once per answer');
      } finally {
        await h.supervisor.close();
      }
    });
  });
}

describe('the work n answers given together cost is linear in n', () => {
  // All but the last question answered together (the run resumes, and suspends again on the last
  // one, saving its state with every call), then the last: counted at n = 200 and n = 2,000.
  async function measure(n: number): Promise<Work & { resumes: number }> {
    const h = harness('memory');
    try {
      const plan: ManyPlan = { asks: n };
      const c: Choices = { declined: new Set(), refused: new Set() };
      const { open } = await suspended(h, manyAsker, plan);
      h.reset();
      const rest = open.slice(0, -1);
      const replies = await Promise.all(rest.map((p) => h.supervisor.answer(p.request.id, answerFor(p.request, c))));
      for (const r of replies) assert.equal(r.status, 'suspended');
      const lastOpen = open[open.length - 1]?.request as { id: string; kind: string; data?: unknown };
      const done = await h.supervisor.answer(lastOpen.id, answerFor(lastOpen, c));
      assert.equal(done.status, 'done');
      checkResults(h, plan, c, textOf(done));
      return { ...h.work, resumes: [...h.resumes.values()].reduce((a, b) => a + b, 0) };
    } finally {
      await h.supervisor.close();
    }
  }

  it('200 vs 2,000 answers: the same number of resumes and saves; ten times the calls written, not a hundred', async () => {
    const small = await measure(200);
    const large = await measure(2000);
    assert.equal(small.resumes, 2, 'the answers given together are one resume, the last another');
    assert.equal(large.resumes, 2);
    assert.equal(large.stateSaves, small.stateSaves, JSON.stringify({ small, large }));
    // One answer at a time wrote the state (all n calls) about n/10 times: 100× for 10× the answers.
    const ratio = large.pendingWritten / small.pendingWritten;
    assert.ok(
      ratio <= 10.5,
      `the calls written grew ${ratio.toFixed(1)}× for 10× the answers (${JSON.stringify({ small, large })})`,
    );
  });
});
