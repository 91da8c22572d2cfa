// Issue 32, item 5: send() to an agent waiting on a question queued the
// message silently — a script that never answered exited with code 13 and no
// message. Now the waiting is visible: a message sent while the agent waits on
// a question is refused with ERR_AGENT_SUSPENDED naming the question (and so is
// one that was waiting behind a message that then suspended), unless it is sent
// with { whileSuspended: 'queue' }; either way `agent.message.waiting` is
// emitted. The question comes from a subagent on a worker thread.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { defineAgent, isTroupeError } from '@troupe/core';
import { ScriptedModel, type ScriptInput } from '@troupe/core/testing';
import { sqlitePersistence } from '@troupe/sqlite';
import { type AgentReply, createSupervisor, type Supervisor, type SupervisorEvents } from '@troupe/supervisor';
import { deployer } from '../fixtures/agents/hitl.js';
import { tempDir } from '../persistence/sqliteFiles.js';

type Waiting = SupervisorEvents['agent.message.waiting'][0];

/** "deploy" delegates to the deployer (which asks where, on a worker); anything else is echoed. */
function step({ messages, lastToolResults }: ScriptInput) {
  const last = messages[messages.length - 1];
  if (last?.role === 'tool') return `reported ${lastToolResults.map((r) => String(r.content)).join(', ')}`;
  const text = typeof last?.content === 'string' ? last.content : '';
  if (text.includes('deploy')) {
    return { toolCalls: [{ name: 'task', arguments: { subagent: 'deployer', instructions: 'deploy' } }] };
  }
  return `echo: ${text}`;
}

const lead = () =>
  defineAgent({
    name: 'sendLead',
    instructions: 'Delegate deploys; echo the rest.',
    subagents: [deployer],
    model: new ScriptedModel([step], { whenExhausted: 'repeat-last' }),
  });

async function withSupervisor(
  fn: (supervisor: Supervisor, waiting: Waiting[]) => Promise<void>,
  directory?: string,
): Promise<void> {
  const supervisor = createSupervisor({
    pool: { threads: 1 },
    ...(directory === undefined ? {} : { persistence: sqlitePersistence({ directory }) }),
  });
  const waiting: Waiting[] = [];
  supervisor.on('agent.message.waiting', (e) => waiting.push(e));
  try {
    await fn(supervisor, waiting);
  } finally {
    await supervisor.close({ timeoutMs: 2000 });
  }
}

function requestOf(reply: AgentReply): string {
  assert.equal(reply.status, 'suspended', JSON.stringify(reply));
  return reply.status === 'suspended' ? reply.request.id : '';
}

/** The message names the question and what to do. */
function refusedFor(requestId: string, agentId: string) {
  return (error: unknown): boolean => {
    assert.ok(isTroupeError(error, 'ERR_AGENT_SUSPENDED'), String(error));
    assert.equal(
      (error as Error).message,
      `agent ${agentId} is waiting on question ${requestId} ("Which environment for api?"): answer it with supervisor.answer("${requestId}", answer), or withdraw it with cancel(), then send; or send with { whileSuspended: 'queue' } to have the message wait until it is answered`,
    );
    return true;
  };
}

const env = { ok: true, data: { env: 'prod' } } as const;

describe('send() to an agent waiting on a question', { timeout: 60_000 }, () => {
  it('is refused with ERR_AGENT_SUSPENDED naming the question, and reported; the question stays open', async () => {
    await withSupervisor(async (supervisor, waiting) => {
      const agent = await supervisor.startAgent(lead(), { scope: {} });
      const requestId = requestOf(await agent.send('deploy api'));
      await assert.rejects(agent.send('are you there?'), refusedFor(requestId, agent.id));
      await assert.rejects(
        agent.send('and now?', { whileSuspended: 'refuse' }),
        refusedFor(requestId, agent.id),
        'refuse is the default, and may be said',
      );
      await assert.rejects(
        async () => {
          for await (const _ of agent.stream('streamed?')) assert.fail('nothing is streamed');
        },
        refusedFor(requestId, agent.id),
      );
      assert.deepEqual(
        waiting.map(({ agentId, requestId: id, queued, waiting: n }) => ({ agentId, id, queued, n })),
        [1, 2, 3].map(() => ({ agentId: agent.id, id: requestId, queued: false, n: 0 })),
      );
      assert.equal(agent.status, 'suspended');
      assert.deepEqual(
        supervisor.pendingRequests().map((p) => p.request.id),
        [requestId],
      );
      const answered = await supervisor.answer(requestId, env);
      assert.equal(answered.status === 'done' && answered.text, 'reported ["deployed api to prod"]');
      const after = await agent.send('are you there?');
      assert.equal(after.status === 'done' && after.text, 'echo: are you there?');
    });
  });

  it("with { whileSuspended: 'queue' } it waits, reported, and runs once the question is answered", async () => {
    await withSupervisor(async (supervisor, waiting) => {
      const agent = await supervisor.startAgent(lead(), { scope: {} });
      const requestId = requestOf(await agent.send('deploy api'));
      const reported = new Promise<Waiting>((resolve) => supervisor.once('agent.message.waiting', resolve));
      let settled: AgentReply | undefined;
      const queued = agent.send('then this', { whileSuspended: 'queue' }).then((r) => {
        settled = r;
        return r;
      });
      const event = await reported;
      assert.deepEqual(
        { agentId: event.agentId, requestId: event.requestId, queued: event.queued, waiting: event.waiting },
        { agentId: agent.id, requestId, queued: true, waiting: 1 },
      );
      assert.equal(waiting.length, 1);
      assert.equal(settled, undefined, 'it waits on the question');
      const answered = await supervisor.answer(requestId, env);
      assert.equal(answered.status, 'done');
      const reply = await queued;
      assert.equal(reply.status === 'done' && reply.text, 'echo: then this');
    });
  });

  it('a message waiting behind one that suspends is refused then, unless it asked to queue', async () => {
    await withSupervisor(async (supervisor, waiting) => {
      const agent = await supervisor.startAgent(lead(), { scope: {} });
      const first = agent.send('deploy api');
      assert.equal(agent.status, 'running');
      const refused = agent.send('behind it');
      const kept = agent.send('behind it too', { whileSuspended: 'queue' });
      const requestId = requestOf(await first);
      await assert.rejects(refused, refusedFor(requestId, agent.id));
      assert.deepEqual(
        waiting.map(({ requestId: id, queued, waiting: n }) => ({ id, queued, n })),
        [
          { id: requestId, queued: false, n: 1 },
          { id: requestId, queued: true, n: 1 },
        ],
      );
      const answered = await supervisor.answer(requestId, env);
      assert.equal(answered.status, 'done');
      const reply = await kept;
      assert.equal(reply.status === 'done' && reply.text, 'echo: behind it too');
    });
  });

  it('withdrawing the question (cancel) lets a queued message run; a bad whileSuspended is refused', async () => {
    await withSupervisor(async (supervisor) => {
      const agent = await supervisor.startAgent(lead(), { scope: {} });
      requestOf(await agent.send('deploy api'));
      const queued = agent.send('after the cancel', { whileSuspended: 'queue' });
      await assert.rejects(agent.send('x', { whileSuspended: 'wait' as never }), (error: unknown) => {
        assert.ok(isTroupeError(error, 'ERR_INVALID_ARGUMENT'), String(error));
        assert.match((error as Error).message, /whileSuspended.*'refuse' \(the default\) or 'queue', got "wait"/);
        return true;
      });
      assert.equal(agent.cancel(), true);
      const reply = await queued;
      assert.equal(reply.status === 'done' && reply.text, 'echo: after the cancel');
    });
  });

  it('with a durable store: refused once the store says the question is still open (a stale copy is ERR_STORE_FENCED instead)', async (t) => {
    const dir = tempDir('send-suspended');
    t.after(() => dir.remove());
    await withSupervisor(async (supervisor, waiting) => {
      const agent = await supervisor.startAgent(lead(), { scope: {} });
      const requestId = requestOf(await agent.send('deploy api'));
      await assert.rejects(agent.send('are you there?'), refusedFor(requestId, agent.id));
      assert.deepEqual(
        waiting.map(({ requestId: id, queued }) => ({ id, queued })),
        [{ id: requestId, queued: false }],
      );
      const queued = agent.send('then this', { whileSuspended: 'queue' });
      const answered = await supervisor.answer(requestId, env);
      assert.equal(answered.status, 'done');
      const reply = await queued;
      assert.equal(reply.status === 'done' && reply.text, 'echo: then this');
    }, dir.dir);
  });
});
