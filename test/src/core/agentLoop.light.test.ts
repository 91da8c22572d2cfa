// A light check that the pieces tested in this folder (context update,
// executor, tool context) compose in the agent loop. The loop itself is
// tested more fully elsewhere.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  type AgentId,
  CancelSource,
  ContextUpdate,
  defineAgent,
  defineTool,
  sealScope,
  type ToolContext,
  ToolResult,
} from '@troupe/core';
import { initialLoopState, localRunCancellation, type RunContext, runAgentLoop } from '@troupe/core/internal';
import { ManualClock, ScriptedModel } from '@troupe/core/testing';
import { z } from 'zod';

const agentId = 'agent_loop' as AgentId;

function setup(toolContext: Record<string, unknown> = {}) {
  const seen: { flag: unknown; scope: unknown; metadata: unknown }[] = [];
  const addNote = defineTool({
    name: 'add_note',
    description: 'Remember a note',
    parameters: z.object({ note: z.string() }),
    execute: ({ note }, ctx: ToolContext<unknown, { flag?: unknown }>) => {
      seen.push({ flag: ctx.flag, scope: ctx.scope, metadata: ctx.state.metadata });
      return ToolResult.ok(
        { added: note },
        ContextUpdate.empty().append('notes', note).logEvent('note_added', { note }),
      );
    },
  });
  const model = new ScriptedModel([
    { toolCalls: [{ name: 'add_note', arguments: { note: 'a' } }] },
    { toolCalls: [{ name: 'add_note', arguments: { note: 'b' } }] },
    ({ toolResults }) => `noted ${toolResults.length}`,
  ]);
  const agent = defineAgent({ name: 'noter', instructions: 'take notes', model, tools: [addNote] });
  const run: RunContext = {
    scope: sealScope({ userId: 'u1' }),
    toolContext: Object.freeze(toolContext),
    agentId,
    parentAgentId: undefined,
  };
  return { agent, run, seen };
}

describe('runAgentLoop (light)', () => {
  it('folds each tool call’s ContextUpdate into metadata and records its events', async () => {
    const { agent, run, seen } = setup({ flag: 'on' });
    const clock = new ManualClock();
    const outcome = await runAgentLoop({
      agent,
      run,
      state: initialLoopState(agentId, agent.instructions, Object.freeze({ notes: ['earlier'] })),
      input: 'remember a and b',
      clock,
      cancellation: localRunCancellation(),
    });
    assert.equal(outcome.status, 'done');
    assert.ok(outcome.status === 'done' && outcome.text === 'noted 2');
    assert.deepEqual(outcome.state.metadata, { notes: ['earlier', 'a', 'b'] });
    assert.ok(Object.isFrozen(outcome.state.metadata.notes));
    assert.deepEqual(
      outcome.state.events.map((e) => [e.type, e.data, e.agentId]),
      [
        ['note_added', { note: 'a' }, agentId],
        ['note_added', { note: 'b' }, agentId],
      ],
    );
    // The second call saw the metadata the first one wrote; both saw the channels.
    assert.deepEqual(
      seen.map((s) => s.metadata),
      [{ notes: ['earlier'] }, { notes: ['earlier', 'a'] }],
    );
    assert.deepEqual(
      seen.map((s) => s.flag),
      ['on', 'on'],
    );
    assert.deepEqual(seen[0]?.scope, { userId: 'u1' });
  });

  it('a run cancelled before it starts never calls a tool', async () => {
    const { agent, run, seen } = setup();
    const source = new CancelSource();
    source.cancel('user');
    const outcome = await runAgentLoop({
      agent,
      run,
      state: initialLoopState(agentId, agent.instructions, Object.freeze({})),
      input: 'go',
      clock: new ManualClock(),
      cancellation: localRunCancellation(source),
    });
    assert.equal(outcome.status, 'cancelled');
    assert.equal(seen.length, 0);
    assert.deepEqual(outcome.state.metadata, {});
  });
});
