// Deleting a conversation while one of its messages runs. What a user who deletes a conversation
// expects is that it is gone and stays gone; the message's next saves (its turn's checkpoint, its
// tool calls, its end) would write the conversation back as rows of a conversation nobody has. So
// the store refuses the deletion with ERR_CONVERSATION_BUSY while a run of it is `running` under a
// live writer, and nothing is deleted: cancel the message (or wait for its reply), then delete.
// A run a dead process left `running` does not hold a deletion up.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { isTroupeError } from '@troupe/core';
import { sqlitePersistence } from '@troupe/sqlite';
import {
  type AgentReply,
  createSupervisor,
  MemoryPersistence,
  type PersistenceAdapter,
  type PersistenceContext,
} from '@troupe/supervisor';
import Database from 'better-sqlite3';
import { office } from '../fixtures/agents/durable.js';
import { ctx } from './records.js';
import { tempDir } from './sqliteFiles.js';

const dirs: { remove(): void }[] = [];
after(() => {
  for (const d of dirs) d.remove();
});
const tenantKey = (s: unknown) => (s as { org: string }).org;
const alice = { org: 'acme', userId: 'alice' };

async function held(gate: Int32Array): Promise<void> {
  while (Atomics.load(gate, 1) === 0) await Atomics.waitAsync(gate, 1, 0).value;
}

function release(gate: Int32Array): void {
  Atomics.store(gate, 0, 1);
  Atomics.notify(gate, 0);
}

/** Every row of the conversation, table by table, read from the file itself. */
function rowsOf(file: string, conversationId: string): Record<string, number> {
  const db = new Database(file, { readonly: true });
  try {
    const tables = db
      .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE '%conversation_id%'")
      .pluck()
      .all() as string[];
    assert.ok(tables.length >= 7, `the tables holding conversations: ${tables.join(', ')}`);
    const out: Record<string, number> = {};
    for (const t of tables) {
      const n = db.prepare(`SELECT count(*) FROM ${t} WHERE conversation_id = ?`).pluck().get(conversationId) as number;
      if (n > 0) out[t] = n;
    }
    return out;
  } finally {
    db.close();
  }
}

/**
 * Suspend a conversation on a question, answer it, and delete the conversation the moment the
 * answer is taken in the store (before the run it resumes is claimed, or has saved anything); its
 * reply must not be `done` (with a durable store the answer is refused: its run's claim is fenced
 * by the deletion). `left` checks what the store holds of it then (before the supervisor closes
 * the store).
 */
async function deleteAsTheAnswerResumes(
  store: PersistenceAdapter,
  c: PersistenceContext,
  effects: string,
  left: () => Promise<void> | void,
): Promise<void> {
  const supervisor = createSupervisor({ agents: [office], persistence: store, pool: { threads: 2, graceMs: 100 } });
  try {
    const agent = await supervisor.startAgent(office, { scope: alice, agentId: c.agentId, toolContext: { effects } });
    const asked = await agent.send('release it');
    assert.equal(asked.status, 'suspended', JSON.stringify(asked));
    const requestId = (asked as { request: { id: string } }).request.id;
    let deleted: Promise<boolean> | undefined;
    const take = store.answerRequest.bind(store);
    // Deleted right after the store took the answer: what the supervisor does next meets a deleted conversation.
    (store as { answerRequest: typeof take }).answerRequest = async (...args) => {
      const taken = await take(...args);
      deleted ??= store.deleteConversation(alice, c);
      await deleted;
      return taken;
    };
    const reply: AgentReply | Error = await supervisor.answer(requestId, { ok: true, data: { env: 'prod' } }).then(
      (r) => r,
      (error: unknown) => error as Error,
    );
    assert.equal(await deleted, true, 'the suspended conversation was deleted');
    await supervisor.stopAgent(c.agentId);
    if (reply instanceof Error) {
      assert.ok(isTroupeError(reply, 'ERR_STORE_FENCED') && /deleted/.test(reply.message), String(reply));
    } else {
      assert.notEqual(reply.status, 'done', `a run of a deleted conversation ended done: ${JSON.stringify(reply)}`);
    }
    await left();
  } finally {
    await supervisor.close();
  }
}

describe('deleting a conversation whose message runs', () => {
  it('SQLite: refused with ERR_CONVERSATION_BUSY, nothing deleted; cancelled and ended, it deletes, and no row of it is left', async () => {
    const d = tempDir('delete-busy');
    dirs.push(d);
    const file = join(d.dir, 'troupe.sqlite');
    const effects = join(d.dir, 'effects.log');
    const store = sqlitePersistence({ file, tenantKey });
    const supervisor = createSupervisor({ agents: [office], persistence: store, pool: { threads: 1, graceMs: 100 } });
    const c = ctx('office-d1', 'office-d1');
    const gate = new Int32Array(new SharedArrayBuffer(8));
    try {
      const agent = await supervisor.startAgent(office, {
        scope: alice,
        agentId: c.agentId,
        toolContext: { effects, gate },
      });
      assert.equal((await agent.send('hello')).status, 'done');
      const reply = agent.send('charge it');
      await held(gate); // the charge is under way
      await assert.rejects(
        store.deleteConversation(alice, c),
        (e) =>
          isTroupeError(e, 'ERR_CONVERSATION_BUSY') &&
          /nothing was deleted/.test((e as Error).message) &&
          /cancel/.test((e as Error).message),
      );
      assert.equal((await store.loadState(alice, c))?.status, 'running', 'nothing was deleted');
      // The remedy the error names: cancel the message, and once its reply is in, delete.
      agent.cancel();
      release(gate);
      assert.equal((await reply).status, 'cancelled');
      assert.equal(await store.deleteConversation(alice, c), true);
      await supervisor.stopAgent(c.agentId);
      assert.deepEqual(rowsOf(file, c.conversationId), {}, 'no row of the conversation is left in any table');
      assert.equal(await store.loadState(alice, c), undefined);
      assert.deepEqual(await store.loadMessages(alice, c), []);
      assert.deepEqual(await store.loadRuns(alice, c, { interrupted: true }), []);
      assert.deepEqual((await store.listConversations(alice)).items, []);
      assert.deepEqual((await store.listRequests(alice)).items, []);
      const charges = existsSync(effects) ? readFileSync(effects, 'utf8').match(/^charge /gm) : null;
      assert.equal(charges?.length, 1, 'the charge ran once');
    } finally {
      release(gate); // a failed assertion must not leave the charge held
      await supervisor.close();
    }
  });

  it('MemoryPersistence (not durable: nothing of the message is saved until it ends): deleted, and the message’s save of it is refused', async () => {
    const store = new MemoryPersistence({ tenantKey });
    const supervisor = createSupervisor({ agents: [office], persistence: store, pool: { threads: 1, graceMs: 100 } });
    const c = ctx('office-d2', 'office-d2');
    const gate = new Int32Array(new SharedArrayBuffer(8));
    try {
      const agent = await supervisor.startAgent(office, { scope: alice, agentId: c.agentId, toolContext: { gate } });
      assert.equal((await agent.send('hello')).status, 'done');
      const reply = agent.send('charge it');
      await held(gate);
      assert.equal(await store.deleteConversation(alice, c), true);
      release(gate);
      const after = await reply;
      assert.equal(after.status, 'failed');
      assert.ok(
        isTroupeError((after as { error: unknown }).error, 'ERR_STORE_FENCED') &&
          /its conversation was deleted/.test((after as { error: Error }).error.message),
        JSON.stringify(after),
      );
      assert.equal(await store.loadState(alice, c), undefined);
      assert.deepEqual(await store.loadMessages(alice, c), []);
      assert.deepEqual((await store.listConversations(alice)).items, []);
      assert.equal(store.size, 0, 'nothing of the conversation is kept');
    } finally {
      release(gate);
      await supervisor.close();
    }
  });

  it('SQLite: a suspended conversation deleted as an answer resumes its run: the run does not write the conversation back', async () => {
    // The answer is taken (the store's compare-and-set): until the run it resumes is claimed the
    // store still says `suspended`, so the deletion is not refused. Nothing the supervisor writes
    // after that may bring back rows of a conversation nobody has.
    const d = tempDir('delete-resumed');
    dirs.push(d);
    const file = join(d.dir, 'troupe.sqlite');
    const c = ctx('office-d3', 'office-d3');
    await deleteAsTheAnswerResumes(sqlitePersistence({ file, tenantKey }), c, join(d.dir, 'effects.log'), () => {
      assert.deepEqual(rowsOf(file, c.conversationId), {}, 'no row of the deleted conversation is left in any table');
    });
  });

  it('memory: a suspended conversation deleted as an answer resumes its run: the run does not write the conversation back', async () => {
    const d = tempDir('delete-resumed-memory');
    dirs.push(d);
    const store = new MemoryPersistence({ tenantKey });
    const c = ctx('office-m3', 'office-m3');
    await deleteAsTheAnswerResumes(store, c, join(d.dir, 'effects.log'), async () => {
      assert.deepEqual((await store.listConversations(alice)).items, []);
      assert.equal(await store.loadState(alice, c), undefined);
      assert.deepEqual(await store.loadRuns(alice, c, { interrupted: true }), []);
      assert.deepEqual((await store.listRequests(alice)).items, []);
    });
  });
});
