import assert from 'node:assert/strict';
import { copyFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { SCHEMA_VERSION, sqlitePersistence } from '@troupe/sqlite';
import { READABLE_STATE_VERSIONS, STATE_ENVELOPE_VERSION } from '@troupe/supervisor';
import { ctx } from './records.js';
import { tempDir } from './sqliteFiles.js';

// Every shipped schema version has a database file here, written by the code
// that shipped it (fixtures/writeFixture.ts); each must stay readable.
const FIXTURES = fileURLToPath(new URL('../../src/persistence/fixtures/', import.meta.url));
const shipped = readdirSync(FIXTURES).filter((f) => /^schema-\d+\.sqlite$/.test(f));
const scope = { tenant: 'fixture-tenant' };
const tenantKey = (s: unknown) => (s as { tenant: string }).tenant;
const dirs: { remove(): void }[] = [];
after(() => {
  for (const d of dirs) d.remove();
});

function open(name: string) {
  const d = tempDir('fixture');
  dirs.push(d);
  const file = join(d.dir, name);
  copyFileSync(join(FIXTURES, name), file); // opening writes (its owner row): never touch the checked-in file
  return sqlitePersistence({ file, tenantKey });
}

describe('fixture databases of every shipped version', () => {
  it('there is one for every schema version up to the current one', () => {
    assert.deepEqual(
      shipped.map((f) => Number(/\d+/.exec(f)?.[0])).sort((a, b) => a - b),
      Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1),
    );
    assert.ok(READABLE_STATE_VERSIONS.includes(1) && READABLE_STATE_VERSIONS.includes(STATE_ENVELOPE_VERSION));
  });

  for (const name of shipped) {
    it(`${name}: a version 1 envelope is read migrated to the current version`, async () => {
      const store = open(name);
      const state = await store.loadState(scope, ctx('conversation-v1', 'agent-v1'));
      assert.equal(state?.version, STATE_ENVELOPE_VERSION);
      assert.equal(state?.status, 'suspended');
      assert.equal(state?.waitingOn, 'ask-1');
      assert.equal(state?.pendingRequest?.request.prompt, 'Which account?');
      assert.equal(state?.state.metadata.note, 'hello');
      await store.close();
    });

    it(`${name}: every row reads through the current code`, async () => {
      const store = open(name);
      const c = ctx('conversation-v2', 'agent-v2');
      const state = await store.loadState(scope, c);
      assert.deepEqual(
        [state?.version, state?.status, state?.waitingOn, state?.runId],
        [2, 'suspended', 'request-v2', 'run-v2'],
      );
      assert.deepEqual(
        state?.state.messages.map((m) => [m.role, m.content]),
        [
          ['system', 'be brief'],
          ['user', 'hello'],
        ],
      );
      assert.deepEqual(
        (await store.loadMessages(scope, c)).map((m) => m.content),
        ['refund order 7', 'asking a person'],
      );
      assert.deepEqual(
        (await store.loadRuns(scope, c)).map((r) => [r.runId, r.status, r.attempt]),
        [['run-v2', 'suspended', 2]],
      );
      assert.deepEqual(
        (await store.loadToolCalls(scope, 'run-v2')).map((t) => t.toolCallId),
        ['call-started'],
      );
      const requests = await store.listRequests(scope);
      assert.deepEqual(
        requests.items.map((r) => [r.requestId, r.approval, r.status]),
        [['request-v2', true, 'open']],
      );
      assert.deepEqual(
        (await store.listConversations(scope)).items.map((s) => [s.conversationId, s.status, s.openRequests]),
        [
          ['conversation-v2', 'suspended', 1],
          ['conversation-v1', 'suspended', 0],
        ],
      );
      assert.equal((await store.answerRequest(scope, 'request-v2', { id: 'x', ok: true }, 3_000)).status, 'taken');
      // The transcript goes on after the messages it had (migrated rows, or chunks), in order.
      await store.saveMessage(scope, { role: 'user', content: 'and the invoice?' }, c);
      assert.deepEqual(
        (await store.loadMessages(scope, c)).map((m) => m.content),
        ['refund order 7', 'asking a person', 'and the invoice?'],
      );
      await store.close();
    });
  }
});
