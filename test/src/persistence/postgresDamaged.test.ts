// Bad input for the PostgreSQL store: rows or a schema changed by something other than Troupe.
// Every read of a damaged row is ERR_STORE_CORRUPT naming its table and key (never a bare
// SyntaxError, or a row taken for an empty one); a damaged schema is refused at open.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isTroupeError } from '@troupe/core';
import { type PostgresPersistence, postgresPersistence } from '@troupe/postgres';
import { freshSchema, openStore, server } from './postgresStores.js';
import { ctx, envelope, request, run, scopeOf, tenantKey } from './records.js';

const scope = scopeOf('t1');
const c = ctx('c1');

function corrupt(mentions: RegExp) {
  return (error: unknown) => {
    assert.ok(isTroupeError(error, 'ERR_STORE_CORRUPT'), `expected ERR_STORE_CORRUPT, got ${String(error)}`);
    assert.match((error as Error).message, mentions);
    return true;
  };
}

/** A store holding one conversation with a state, a message, a live run and an open request. */
async function filled(): Promise<{ schema: string; store: PostgresPersistence; tamper(sql: string): Promise<void> }> {
  const s = await server();
  const schema = freshSchema('damaged');
  const store = await openStore({ schema, tenantKey });
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
  return { schema, store, tamper: async (sql) => void (await s.sql(`SET search_path TO ${schema}; ${sql}`)) };
}

const DAMAGES: readonly [string, string][] = [
  ['not JSON', '{"runId": '],
  ['JSON null', 'null'],
  ['an empty object', '{}'],
  ['a record of the wrong shape', '{"runId": 7, "status": "sleeping"}'],
];
const literal = (text: string) => `'${text.replaceAll("'", "''")}'`;

describe('PostgresPersistence: damaged rows are ERR_STORE_CORRUPT naming where they are', () => {
  for (const [what, json] of DAMAGES) {
    it(`a run row holding ${what}`, async () => {
      const { store, tamper } = await filled();
      await tamper(`UPDATE runs SET json = ${literal(json)} WHERE run_id = 'r1'`);
      await assert.rejects(store.getRun(scope, 'r1'), corrupt(/run row "r1" \(table runs\) in PostgreSQL/));
      await assert.rejects(store.loadRuns(scope, c), corrupt(/a run of conversation c1/));
      await store.close();
    });

    it(`a request row holding ${what}: not answered, and it stays open`, async () => {
      const { schema, store, tamper } = await filled();
      await tamper(`UPDATE requests SET json = ${literal(json)} WHERE request_id = 'q1'`);
      await assert.rejects(store.getRequest(scope, 'q1'), corrupt(/request row "q1" \(table requests\)/));
      await assert.rejects(store.listRequests(scope), corrupt(/request row "q1"/));
      await assert.rejects(store.answerRequest(scope, 'q1', { id: 'x', ok: true }, 5), corrupt(/request row "q1"/));
      const s = await server();
      assert.equal(
        (await s.sql(`SELECT status FROM ${schema}.requests WHERE request_id = 'q1'`)).rows[0].status,
        'open',
      );
      await store.close();
    });

    it(`a transcript chunk holding ${what}`, async () => {
      const { store, tamper } = await filled();
      await tamper(`UPDATE messages SET json = ${literal(`${json === '{}' ? '{"role": 1}' : json}\n`)}`);
      await assert.rejects(store.loadMessages(scope, c), corrupt(/message 1 of agent-c1/));
      await store.close();
    });

    it(`a state row holding ${what}`, async () => {
      const { store, tamper } = await filled();
      await tamper(
        `UPDATE states SET json = ${literal(json === '{}' ? '{"version": 2, "agentId": "agent-c1"}' : json)}`,
      );
      await assert.rejects(store.loadState(scope, c), corrupt(/the saved state of agent-c1/));
      await store.close();
    });
  }

  for (const [what, sql] of [
    ['more messages than its lines', 'UPDATE messages SET count = count + 1'],
    ['a last line cut off', 'UPDATE messages SET json = substr(json, 1, length(json) - 1)'],
    ['emptied (count 0, no text)', "UPDATE messages SET count = 0, json = ''"],
  ] as const) {
    it(`a transcript chunk whose count disagrees with its text (${what})`, async () => {
      const { store, tamper } = await filled();
      await tamper(sql);
      await assert.rejects(store.loadMessages(scope, c), corrupt(/message 1 of agent-c1/));
      await store.close();
    });
  }

  for (const revision of ['0', '-3']) {
    it(`a state row whose revision is ${revision}`, async () => {
      const { store, tamper } = await filled();
      await tamper(`UPDATE states SET revision = ${revision}`);
      await assert.rejects(store.loadState(scope, c), corrupt(/the saved state of agent-c1.*revision/));
      await store.close();
    });
  }

  it('a running run holding non-JSON does not stop recovery: the others are marked; its conversation reports it', async () => {
    const { schema, store, tamper } = await filled();
    const other = ctx('c2');
    await store.commit(scope, { runs: [run(other, 'r2', { status: 'running' })] }, other);
    await store.close(); // its lease is dropped: its runs are a dead owner's
    await tamper(`UPDATE runs SET json = '{' WHERE run_id = 'r1'`);
    const again = await openStore({ schema, tenantKey });
    assert.deepEqual(
      (await again.markInterrupted()).map((r) => [r.runId, r.status]),
      [['r2', 'interrupted']],
    );
    const s = await server();
    assert.equal((await s.sql(`SELECT status FROM ${schema}.runs WHERE run_id = 'r1'`)).rows[0].status, 'interrupted');
    await assert.rejects(again.getRun(scope, 'r1'), corrupt(/run row "r1"/));
    await again.close();
  });
});

describe('PostgresPersistence: a damaged schema is refused at open as ERR_STORE_CORRUPT', () => {
  for (const [what, sql] of [
    ['a missing table', 'DROP TABLE requests'],
    ['a missing column', 'ALTER TABLE states DROP COLUMN revision'],
    ['an emptied schema_version', 'DELETE FROM schema_version'],
  ] as const) {
    it(what, async () => {
      const { schema, store, tamper } = await filled();
      await store.close();
      await tamper(sql);
      const s = await server();
      await assert.rejects(
        postgresPersistence({ connectionString: s.url, schema, tenantKey }),
        corrupt(
          new RegExp(`(damaged|schema_version).*|PostgreSQL 127\\.0\\.0\\.1:${s.port}/troupe \\(schema ${schema}\\)`),
        ),
      );
    });
  }
});
