// Issue 31, item 5: an answer taken by one process races a restore of the same conversation in
// another (two supervisors, each with its own store connection and owner, on one SQLite file).
// Process A answers a question asked two levels down; before anything of A's resumes, process B
// starts the conversation, finds the answer taken and no run of it running, and delivers it too.
// Both carried the answer forward: A ran the answered tool, B saved first, A's reply was `failed
// ERR_STORE_FENCED` and the transcript held a fence error as the manager's task result. Exactly
// one process carries an answer forward (the one that claims the run first); the other writes
// nothing and says why.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { isTroupeError, type Request } from '@troupe/core';
import { type SqlitePersistence, sqlitePersistence } from '@troupe/sqlite';
import { createSupervisor, isTerminalRunStatus, type Supervisor } from '@troupe/supervisor';
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

function place(): { file: string; effects: string } {
  const d = tempDir('answer-race');
  dirs.push(d);
  return { file: join(d.dir, 'troupe.sqlite'), effects: join(d.dir, 'effects.log') };
}

function open(file: string): { supervisor: Supervisor; store: SqlitePersistence } {
  const store = sqlitePersistence({ file, tenantKey });
  return {
    supervisor: createSupervisor({ agents: [office], persistence: store, pool: { threads: 1, graceMs: 100 } }),
    store,
  };
}

function effects(file: string): string[] {
  return existsSync(file) ? readFileSync(file, 'utf8').trim().split('\n').filter(Boolean) : [];
}

/**
 * Hold `store`'s `method` once its real call has returned (the first call only): `reached`
 * resolves then, and the caller goes on when `release()` is called. What the store did is done;
 * only the process that asked waits.
 */
function holdAfter(store: SqlitePersistence, method: 'answerRequest' | 'loadState') {
  const real = (store[method] as (...args: unknown[]) => Promise<unknown>).bind(store);
  let reached!: () => void;
  let release!: () => void;
  const at = new Promise<void>((resolve) => {
    reached = resolve;
  });
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  let first = true;
  (store as unknown as Record<string, unknown>)[method] = async (...args: unknown[]) => {
    const result = await real(...args);
    if (first) {
      first = false;
      reached();
      await gate;
    }
    return result;
  };
  return { reached: at, release };
}

/** The next `agent.done` of `agentId` on `supervisor`. */
function done(supervisor: Supervisor, agentId: string): Promise<void> {
  return new Promise((resolve) => {
    const on = (e: { agentId: string }) => {
      if (e.agentId !== agentId) return;
      supervisor.off('agent.done', on as never);
      resolve();
    };
    supervisor.on('agent.done', on as never);
  });
}

/** Every run the file holds: its status and its outcome. */
function runRows(file: string): { runId: string; status: string; outcome: string }[] {
  const db = new Database(file, { readonly: true });
  try {
    const runs = db
      .prepare(`SELECT run_id AS runId, status, coalesce(json_extract(json, '$.outcome'), '') AS outcome FROM runs`)
      .all() as { runId: string; status: string; outcome: string }[];
    return runs;
  } finally {
    db.close();
  }
}

async function suspendedAtDepthTwo(a: { supervisor: Supervisor }, agentId: string, file: string): Promise<Request> {
  const agent = await a.supervisor.startAgent(office, { scope: alice, agentId, toolContext: { effects: file } });
  const asked = await agent.send('please release');
  assert.equal(asked.status, 'suspended', JSON.stringify(asked));
  return (asked as { request: Request }).request;
}

/** Nothing of a fence is in what is saved: not in a message, not in a run's outcome or state. */
async function noFenceSaved(store: SqlitePersistence, file: string, agentId: string): Promise<void> {
  const messages = await store.loadMessages(alice, ctx(agentId, agentId));
  for (const m of messages) assert.doesNotMatch(JSON.stringify(m.content), /FENCED|fenced/, JSON.stringify(m));
  const runs = runRows(file);
  for (const r of runs) {
    assert.doesNotMatch(r.outcome, /FENCED|fenced/, `run ${r.runId}: ${r.outcome}`);
    assert.ok(isTerminalRunStatus(r.status as never), `run ${r.runId} is ${r.status}`);
  }
  const state = JSON.stringify((await store.loadState(alice, ctx(agentId, agentId)))?.state ?? {});
  assert.doesNotMatch(state, /FENCED|fenced/);
}

describe('an answer taken in one process, a restore of its conversation in another', () => {
  it('B restores before A resumes anything: one of them carries the answer forward, the other says why', async () => {
    const at = place();
    const a = open(at.file);
    const b = open(at.file);
    try {
      const request = await suspendedAtDepthTwo(a, 'race-1', at.effects);
      // A takes the answer in the store, and is held right after, before anything of it resumes.
      const took = holdAfter(a.store, 'answerRequest');
      const answered = a.supervisor.answer(request.id, { ok: true, data: { env: 'prod' } }).then(
        (reply) => ({ reply }),
        (error: unknown) => ({ error }),
      );
      await took.reached;
      assert.equal((await b.store.getRequest(alice, request.id))?.status, 'answered');
      // B starts the conversation now: the answer is taken, and nothing of it runs anywhere.
      const carried = done(b.supervisor, 'race-1');
      const onB = await b.supervisor.startAgent(office, {
        scope: alice,
        agentId: 'race-1',
        toolContext: { effects: at.effects },
      });
      took.release();
      const onA = await answered;
      // B claimed the run first: it carries the answer forward; A ran nothing and says so.
      assert.ok('error' in onA, `A's answer resolved ${JSON.stringify(onA)}`);
      assert.ok(isTroupeError(onA.error, 'ERR_CONVERSATION_BUSY'), String(onA.error));
      assert.deepEqual(a.supervisor.pendingRequests(), [], 'A let its stale copy go');
      await carried;
      assert.equal(onB.status, 'idle');
      assert.equal(effects(at.effects).filter((l) => l.startsWith('release')).length, 1, 'the tool ran once');
      const last = (await b.store.loadMessages(alice, ctx('race-1', 'race-1'))).at(-1);
      assert.match(String(last?.content), /released api to prod/);
      await noFenceSaved(b.store, at.file, 'race-1');
    } finally {
      await a.supervisor.close();
      await b.supervisor.close();
    }
  });

  it('two answer()s: B, restoring to answer, finds the answer A took; exactly one carries it forward', async () => {
    const at = place();
    const a = open(at.file);
    const b = open(at.file);
    try {
      const request = await suspendedAtDepthTwo(a, 'race-2', at.effects);
      // B answers as alice (it does not hold the conversation: it restores it), held as it loads it.
      const loading = holdAfter(b.store, 'loadState');
      const fromB = b.supervisor
        .answer(request.id, { ok: true, data: { env: 'eu' } }, { scope: alice, toolContext: { effects: at.effects } })
        .then(
          (reply) => ({ reply }),
          (error: unknown) => ({ error }),
        );
      await loading.reached;
      // Meanwhile A takes the answer (held before anything of it resumes), then B's restore goes on.
      const took = holdAfter(a.store, 'answerRequest');
      const fromA = a.supervisor.answer(request.id, { ok: true, data: { env: 'prod' } }).then(
        (reply) => ({ reply }),
        (error: unknown) => ({ error }),
      );
      await took.reached;
      const carried = done(b.supervisor, 'race-2');
      loading.release();
      const onB = await fromB;
      took.release();
      const onA = await fromA;
      // B's own answer came second: refused. B's restore delivered A's answer first: A says busy.
      assert.ok('error' in onB && isTroupeError(onB.error, 'ERR_REQUEST_ALREADY_ANSWERED'), JSON.stringify(onB));
      assert.ok('error' in onA && isTroupeError(onA.error, 'ERR_CONVERSATION_BUSY'), JSON.stringify(onA));
      await carried;
      const released = effects(at.effects).filter((l) => l.startsWith('release'));
      assert.equal(released.length, 1, 'the tool ran once');
      const last = (await b.store.loadMessages(alice, ctx('race-2', 'race-2'))).at(-1);
      assert.match(String(last?.content), /released api to prod/, 'with the answer that was taken (A’s)');
      await noFenceSaved(b.store, at.file, 'race-2');
    } finally {
      await a.supervisor.close();
      await b.supervisor.close();
    }
  });
});
