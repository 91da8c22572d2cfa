// What a durable store keeps of a run's end (RunRecord.outcome): the end but for
// the lists that grow with the run (events, updates), its error as name,
// message and code — for each status a run ends with. Parent agents on the
// supervisor's thread, ScriptedModels, real SQLite; every wait is on a reply
// or an event.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { defineAgent, defineTool } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import { type SqlitePersistence, sqlitePersistence } from '@troupe/sqlite';
import { createSupervisor, type Supervisor } from '@troupe/supervisor';
import { z } from 'zod';
import { tempDir } from './sqliteFiles.js';

const scope = Object.freeze({ userId: 'u1' });
const look = defineTool({ name: 'look', description: 'looks', parameters: z.object({}), execute: () => 'seen' });
const call = { toolCalls: [{ name: 'look', arguments: {} }] };

describe('the outcome a durable store keeps of a run', () => {
  const dir = tempDir('saved-outcome');
  let store: SqlitePersistence;
  let supervisor: Supervisor;
  const runs = new Map<string, string>();
  const onEnd = (e: { agentId: string; runId: string }) => runs.set(e.agentId, e.runId);
  before(async () => {
    store = sqlitePersistence({ file: join(dir.dir, 'outcome.sqlite') });
    supervisor = createSupervisor({ pool: { threads: 1 }, persistence: store });
    for (const name of ['agent.done', 'agent.failed', 'agent.incomplete', 'agent.cancelled'] as const) {
      supervisor.on(name, onEnd);
    }
    await supervisor.ready();
  });
  after(async () => {
    await supervisor.destroy();
    await store.close();
    dir.remove();
  });

  async function saved(agentId: string, steps: ConstructorParameters<typeof ScriptedModel>[0], maxTurns = 10) {
    const agent = defineAgent({
      name: agentId,
      instructions: 'Look, then answer.',
      model: new ScriptedModel(steps),
      tools: [look],
      maxTurns,
    });
    const handle = await supervisor.startAgent(agent, { scope, agentId });
    const reply = await handle.send('go');
    await handle.stop();
    const runId = runs.get(agentId);
    assert.ok(runId !== undefined, `an outcome event for ${agentId}`);
    const record = await store.getRun(scope, runId);
    return { reply, outcome: record?.outcome };
  }

  it('done: its text and turns (no events, no updates)', async () => {
    const { reply, outcome } = await saved('done-1', [call, 'all seen']);
    assert.equal(reply.status, 'done');
    assert.deepEqual(outcome, { status: 'done', text: 'all seen', turns: 2 });
  });

  it('failed: its error as name, message and code, and its turns', async () => {
    const { reply, outcome } = await saved('failed-1', [
      call,
      () => {
        throw new Error('the model broke');
      },
    ]);
    assert.equal(reply.status, 'failed');
    const o = outcome as { status: string; error: { name: string; message: string }; turns: number };
    assert.equal(o.status, 'failed');
    assert.match(o.error.message, /the model broke/);
    assert.equal(typeof o.error.name, 'string');
    assert.equal(o.turns, 1);
    assert.deepEqual(Object.keys(o).sort(), ['error', 'status', 'turns']);
  });

  it('incomplete: its turns', async () => {
    const { reply, outcome } = await saved('incomplete-1', [call, call, call], 1);
    assert.equal(reply.status, 'incomplete');
    assert.deepEqual(outcome, { status: 'incomplete', turns: 1 });
  });
});
