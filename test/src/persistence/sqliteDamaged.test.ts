// Issue 13, bad input: a store whose rows or schema were changed by something other than Troupe
// (by hand, a tool, a disk). Every read of a damaged row is ERR_STORE_CORRUPT naming its table
// and key — never a bare SyntaxError, a TypeError later, or a row taken for an empty one — and a
// damaged schema is refused at open as ERR_STORE_CORRUPT, not as a write to make writable.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { isTroupeError } from '@troupe/core';
import { type SqlitePersistence, sqlitePersistence } from '@troupe/sqlite';
import Database from 'better-sqlite3';
import { ctx, envelope, request, run, scopeOf, tenantKey } from './records.js';
import { tempDir } from './sqliteFiles.js';

const dirs: { remove(): void }[] = [];
after(() => {
  for (const d of dirs) d.remove();
});
const scope = scopeOf('t1');
const c = ctx('c1');

function corrupt(mentions: RegExp) {
  return (error: unknown) => {
    assert.ok(
      isTroupeError(error, 'ERR_STORE_CORRUPT'),
      `expected ERR_STORE_CORRUPT, got ${(error as Error)?.constructor?.name} ${(error as { code?: string })?.code}: ${(error as Error)?.message}`,
    );
    assert.match((error as Error).message, mentions);
    return true;
  };
}

/** A store holding one conversation with a state, a message, a live run and an open request. */
async function filled(): Promise<{ file: string; store: SqlitePersistence }> {
  const d = tempDir('damaged');
  dirs.push(d);
  const file = join(d.dir, 'troupe.sqlite');
  const store = sqlitePersistence({ file, tenantKey });
  await store.commit(
    scope,
    {
      envelope: envelope(c),
      messages: [{ role: 'user', content: 'hi' }],
      runs: [run(c, 'r1', { status: 'running' })],
      openedRequests: [request(c, 'q1')],
    },
    c,
  );
  return { file, store };
}

/** Change the file behind the store's back (another connection: what a hand or a tool does). */
function tamper(file: string, sql: string, ...params: unknown[]): void {
  const db = new Database(file);
  try {
    db.prepare(sql).run(...params);
  } finally {
    db.close();
  }
}

const DAMAGES: readonly [string, string][] = [
  ['not JSON', '{"runId": '],
  ['JSON null', 'null'],
  ['an empty object', '{}'],
  ['a record of the wrong shape', '{"runId": 7, "status": "sleeping"}'],
];

describe('SqlitePersistence: damaged rows are ERR_STORE_CORRUPT naming where they are', () => {
  for (const [what, json] of DAMAGES) {
    it(`a run row holding ${what}`, async () => {
      const { file, store } = await filled();
      tamper(file, "UPDATE runs SET json = ? WHERE run_id = 'r1'", json);
      await assert.rejects(store.getRun(scope, 'r1'), corrupt(/run row "r1" \(table runs\)/));
      await assert.rejects(store.loadRuns(scope, c), corrupt(/a run of conversation c1/));
      await store.close();
    });

    it(`a request row holding ${what}`, async () => {
      const { file, store } = await filled();
      tamper(file, "UPDATE requests SET json = ? WHERE request_id = 'q1'", json);
      await assert.rejects(store.getRequest(scope, 'q1'), corrupt(/request row "q1" \(table requests\)/));
      await assert.rejects(store.listRequests(scope), corrupt(/request row "q1"/));
      // An answer is not taken from a row that cannot be read, and the row stays open.
      await assert.rejects(store.answerRequest(scope, 'q1', { id: 'x', ok: true }, 5), corrupt(/request row "q1"/));
      await assert.rejects(store.withdrawRequest(scope, 'q1', 5), corrupt(/request row "q1"/));
      const db = new Database(file, { readonly: true });
      assert.equal(db.prepare("SELECT status FROM requests WHERE request_id = 'q1'").pluck().get(), 'open');
      db.close();
      await store.close();
    });

    it(`a transcript chunk holding ${what}`, async () => {
      const { file, store } = await filled();
      // One line, as the chunk's count (1) says: the line itself is what is damaged.
      tamper(file, 'UPDATE messages SET json = ?', `${json === '{}' ? '{"role": 1}' : json}\n`);
      await assert.rejects(store.loadMessages(scope, c), corrupt(/message 1 of agent-c1/));
      await store.close();
    });

    it(`a transcript chunk holding ${what} after a message that reads`, async () => {
      const { file, store } = await filled();
      tamper(file, 'UPDATE messages SET count = 2, json = json || ? || char(10)', json === '{}' ? '{"role": 1}' : json);
      await assert.rejects(store.loadMessages(scope, c), corrupt(/message 2 of agent-c1/));
      await store.close();
    });

    it(`a state row holding ${what}`, async () => {
      const { file, store } = await filled();
      tamper(file, 'UPDATE states SET json = ?', json === '{}' ? '{"version": 2, "agentId": "agent-c1"}' : json);
      await assert.rejects(store.loadState(scope, c), corrupt(/the saved state of agent-c1/));
      await store.close();
    });
  }

  for (const [what, sql] of [
    ['more messages than its lines', 'UPDATE messages SET count = count + 1'],
    [
      'fewer messages than its lines',
      'UPDATE messages SET json = json || \'{"role":"user","content":"x"}\' || char(10)',
    ],
    ['a last line cut off', 'UPDATE messages SET json = substr(json, 1, length(json) - 1)'],
    ['a blob, not text', "UPDATE messages SET json = x'7b7d0a'"],
  ] as const) {
    it(`a transcript chunk whose count disagrees with its text (${what})`, async () => {
      const { file, store } = await filled();
      tamper(file, sql);
      await assert.rejects(
        store.loadMessages(scope, c),
        corrupt(/message 1 of agent-c1 .*chunk 1 of the transcript says it holds/),
      );
      await store.close();
    });
  }

  // Review of fc57da4: the store never writes a chunk of no messages, and numbers an agent's chunks
  // 1, 2, 3… with no gap (max + 1; only a conversation's deletion removes chunks, all of them). A
  // chunk emptied, or one missing between two, is damage: reading it as fewer messages is the
  // "row taken for an empty one" this file forbids.
  it('a transcript chunk emptied (count 0, no text) is not read as no messages', async () => {
    const { file, store } = await filled();
    tamper(file, "UPDATE messages SET count = 0, json = ''");
    await assert.rejects(store.loadMessages(scope, c), corrupt(/message 1 of agent-c1/));
    await store.close();
  });

  it('a transcript missing a chunk between two is not read as a shorter list', async () => {
    const { file, store } = await filled();
    // Messages longer than a chunk (2 KiB): one chunk each, 2 to 4.
    for (const i of [2, 3, 4]) await store.saveMessage(scope, { role: 'user', content: `${i} ${'x'.repeat(3000)}` }, c);
    tamper(file, 'DELETE FROM messages WHERE chunk = 3');
    await assert.rejects(store.loadMessages(scope, c), corrupt(/message 3 of agent-c1/));
    await store.close();
  });

  it('a running run holding non-JSON does not stop recovery: the others are marked and returned; its conversation reports it', async () => {
    const { file, store } = await filled();
    const other = ctx('c2');
    await store.commit(scope, { runs: [run(other, 'r2', { status: 'running' })] }, other);
    await store.close();
    tamper(file, "UPDATE runs SET json = '{' WHERE run_id = 'r1'");
    const again = sqlitePersistence({ file, tenantKey });
    const marked = await again.markInterrupted();
    assert.deepEqual(
      marked.map((r) => [r.runId, r.status]),
      [['r2', 'interrupted']],
    );
    const db = new Database(file, { readonly: true });
    assert.equal(db.prepare("SELECT status FROM runs WHERE run_id = 'r1'").pluck().get(), 'interrupted');
    db.close();
    await assert.rejects(again.getRun(scope, 'r1'), corrupt(/run row "r1"/));
    await again.close();
  });

  it('a run of an earlier process with this pid (a container restarted as pid 1) is marked interrupted', async () => {
    const { file, store } = await filled();
    await store.close();
    // Its owner row names this pid, started at another time: that process is gone.
    tamper(
      file,
      "INSERT INTO owners (owner_id, pid, pid_start, opened_at) VALUES ('earlier', ?, 'another start', 1)",
      process.pid,
    );
    tamper(file, "UPDATE runs SET owner_id = 'earlier' WHERE run_id = 'r1'");
    const again = sqlitePersistence({ file, tenantKey });
    assert.deepEqual(
      (await again.markInterrupted()).map((r) => [r.runId, r.status]),
      [['r1', 'interrupted']],
    );
    await again.close();
  });

  for (const revision of ["'abc'", '1.5', '0', '-3']) {
    it(`a state row whose revision is ${revision}`, async () => {
      const { file, store } = await filled();
      tamper(file, `UPDATE states SET revision = ${revision}`);
      await assert.rejects(store.loadState(scope, c), corrupt(/the saved state of agent-c1.*revision/));
      await store.close();
    });
  }
});

describe('SqlitePersistence: a damaged schema is refused at open as ERR_STORE_CORRUPT', () => {
  const SCHEMA_DAMAGES: readonly [string, string][] = [
    ['a missing table', 'DROP TABLE requests'],
    ['a missing column', 'ALTER TABLE states DROP COLUMN revision'],
    ['an emptied schema_version', 'DELETE FROM schema_version'],
  ];
  for (const [what, sql] of SCHEMA_DAMAGES) {
    it(what, async () => {
      const { file, store } = await filled();
      await store.close();
      tamper(file, sql);
      assert.throws(
        () => sqlitePersistence({ file, tenantKey }),
        (error: unknown) => corrupt(/damaged|schema_version/)(error) && (error as Error).message.includes(file),
      );
    });
  }
});
