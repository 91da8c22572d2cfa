// A toolContext is never saved (as the scope), so a conversation restored from
// the store needs it again (issue 32, item 5): the envelope keeps its keys —
// never its values — and a restore with none of them (forgotten, or misspelt)
// is refused with ERR_TOOL_CONTEXT_MISSING, naming them and saying what to
// pass, nothing restored and the question still open; given again, the tool
// reads it. (One holding some of them passes: a key left out may be optional.)
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { defineAgent, defineTool, isTroupeError, type ToolContext, ToolResult } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import { sqlitePersistence } from '@troupe/sqlite';
import { createSupervisor, type Supervisor } from '@troupe/supervisor';
import { z } from 'zod';
import { tempDir } from './sqliteFiles.js';

const scope = Object.freeze({ tenantId: 'acme' });

const closeTicket = defineTool({
  name: 'close_ticket',
  description: 'Close the ticket of this conversation, once a person agrees',
  parameters: z.object({}),
  execute: (_args, ctx: ToolContext<unknown, { ticketId: string }>) =>
    ctx.answer === undefined
      ? ToolResult.pending({ kind: 'confirm', prompt: 'Close it?' })
      : `closed ${String(ctx.ticketId)} (${typeof ctx.ticketId})`,
});

/** The agent, with a script of its own (a scripted model keeps its place across conversations). */
const triageAgent = () =>
  defineAgent({
    name: 'triage',
    instructions: 'Close the ticket.',
    tools: [closeTicket],
    model: new ScriptedModel([
      { toolCalls: [{ name: 'close_ticket' }] },
      ({ lastToolResults }) => String(lastToolResults[0]?.content),
    ]),
  });
let triage = triageAgent();

/** A supervisor on the file, knowing `triage` by name (so an answer can restore it). */
const open = (directory: string): Supervisor =>
  createSupervisor({ agents: [triage], persistence: sqlitePersistence({ directory }), pool: { threads: 1 } });

/** Leave a conversation suspended in the file: its question's id. */
async function askAndClose(directory: string): Promise<string> {
  triage = triageAgent();
  const first = open(directory);
  try {
    const agent = await first.startAgent(triage, {
      scope,
      agentId: 'triage-1',
      toolContext: { ticketId: 'T-SECRET-41' },
    });
    const reply = await agent.send('close it');
    assert.equal(reply.status, 'suspended', JSON.stringify(reply));
    return reply.status === 'suspended' ? reply.request.id : '';
  } finally {
    await first.close();
  }
}

/** The refusal: names the keys, what was given, and what to pass — never a value. */
function refusedForTicketId(given: string) {
  return (error: unknown): boolean => {
    assert.ok(isTroupeError(error, 'ERR_TOOL_CONTEXT_MISSING'), String(error));
    const message = (error as Error).message;
    assert.equal(
      message,
      `conversation triage-1 (agent triage-1, "triage") was started with toolContext keys "ticketId", and is being restored with ${given}: its tools would read undefined. A toolContext is never saved (as the scope): pass it again — startAgent(agent, { agentId, conversationId, scope, toolContext }), or answer(requestId, answer, { scope, toolContext }) — nothing was restored`,
    );
    assert.doesNotMatch(message, /T-SECRET-41/, 'the value is never saved, so never shown');
    return true;
  };
}

describe('a restored conversation needs its toolContext again', () => {
  it('its envelope keeps the keys, never the values', async (t) => {
    const dir = tempDir('tc-keys');
    t.after(() => dir.remove());
    await askAndClose(dir.dir);
    const store = sqlitePersistence({ directory: dir.dir });
    try {
      const envelope = await store.loadState(scope, { agentId: 'triage-1' as never, conversationId: 'triage-1' });
      assert.deepEqual(envelope?.toolContextKeys, ['ticketId']);
      assert.doesNotMatch(JSON.stringify(envelope), /T-SECRET-41/);
    } finally {
      await store.close();
    }
  });

  it('answer(id, answer, { scope }) without it is refused, the question still open; with it, the tool reads it', async (t) => {
    const dir = tempDir('tc-answer');
    const requestId = await askAndClose(dir.dir);
    const second = open(dir.dir);
    // Down before the directory goes (hooks run in the order they were added).
    t.after(() => second.destroy().finally(() => dir.remove()));
    // What the types refuse (the agents' tools declare ticketId), as an untyped caller sends it.
    const untyped = second as Supervisor;
    await assert.rejects(untyped.answer(requestId, { ok: true }, { scope }), refusedForTicketId('no toolContext'));
    await assert.rejects(
      untyped.answer(requestId, { ok: true }, { scope, toolContext: { ticketid: 'T-SECRET-41' } }),
      refusedForTicketId('none of them (given: "ticketid")'),
    );
    assert.equal(second.agent('triage-1'), undefined, 'nothing was restored');
    const open1 = await second.listRequests(scope);
    assert.deepEqual(
      open1.items.map((r) => r.request.id),
      [requestId],
      'the question is still open',
    );
    const reply = await second.answer(requestId, { ok: true }, { scope, toolContext: { ticketId: 'T-SECRET-41' } });
    assert.equal(reply.status === 'done' ? reply.text : JSON.stringify(reply), 'closed T-SECRET-41 (string)');
  });

  it('startAgent restoring it without the key is refused too', async (t) => {
    const dir = tempDir('tc-start');
    await askAndClose(dir.dir);
    const second = open(dir.dir);
    // Down before the directory goes (hooks run in the order they were added).
    t.after(() => second.destroy().finally(() => dir.remove()));
    await assert.rejects(
      (second as Supervisor).startAgent(triage as never, { scope, agentId: 'triage-1' }),
      refusedForTicketId('no toolContext'),
    );
    const restored = await second.startAgent(triage, {
      scope,
      agentId: 'triage-1',
      toolContext: { ticketId: 'T-SECRET-41' },
    });
    assert.equal(restored.status, 'suspended');
  });

  it('a key given beyond those it was started with is fine; a conversation started without any needs none', async (t) => {
    const dir = tempDir('tc-extra');
    const requestId = await askAndClose(dir.dir);
    const second = open(dir.dir);
    // Down before the directory goes (hooks run in the order they were added).
    t.after(() => second.destroy().finally(() => dir.remove()));
    const reply = await second.answer(
      requestId,
      { ok: true },
      { scope, toolContext: { ticketId: 'T-SECRET-41', traceId: 'tr-1' } },
    );
    assert.equal(reply.status, 'done');
    const free = defineAgent({ name: 'free', instructions: '', model: ScriptedModel.answering('hi') });
    const untyped = second as Supervisor;
    await (await untyped.startAgent(free, { scope, agentId: 'free-1' })).send('hi');
    await second.stopAgent('free-1');
    assert.equal((await untyped.startAgent(free, { scope, agentId: 'free-1' })).status, 'idle');
  });
});
