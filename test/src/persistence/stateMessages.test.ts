import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type { Message } from '@troupe/core';
import { sealMessage } from '@troupe/core/internal';
import { sqlitePersistence } from '@troupe/sqlite';
import type { AgentStateEnvelope } from '@troupe/supervisor';
import Database from 'better-sqlite3';
import { ctx, envelope, loopState, scopeOf, tenantKey } from './records.js';
import { tempDir } from './sqliteFiles.js';

// A state's messages are rows of their own: a turn adds the rows of the messages it added, and a
// state that is not the one this store last wrote (another writer's, a rewritten transcript) is
// written whole again. What is read back is always exactly what was saved last.

const dirs: { remove(): void }[] = [];
after(() => {
  for (const d of dirs) d.remove();
});

function file(): string {
  const d = tempDir('state-messages');
  dirs.push(d);
  return join(d.dir, 'troupe.sqlite');
}

const scope = scopeOf('acme');
const c = ctx('conversation-1', 'agent-1');

function withMessages(messages: readonly Message[], savedAt: number): AgentStateEnvelope {
  return envelope(c, { state: { ...loopState(c.agentId), messages }, savedAt });
}

function said(text: string, role: 'user' | 'assistant' = 'user'): Message {
  return sealMessage({ role, content: text });
}

/** The rows of the state's messages: their ids (a row written again gets a new one) and contents. */
function rows(path: string): { id: number; seq: number; content: string }[] {
  const db = new Database(path, { readonly: true });
  try {
    return (
      db.prepare('SELECT id, seq, json FROM state_messages ORDER BY seq').all() as {
        id: number;
        seq: number;
        json: string;
      }[]
    ).map((r) => ({ id: r.id, seq: r.seq, content: (JSON.parse(r.json) as Message).content as string }));
  } finally {
    db.close();
  }
}

async function contents(store: ReturnType<typeof sqlitePersistence>): Promise<string[]> {
  const state = await store.loadState(scope, c);
  return (state?.state.messages ?? []).map((m) => m.content as string);
}

describe('a state’s messages in rows of their own (SQLite)', () => {
  it('a turn writes the rows of the messages it added; the ones before keep their rows', async () => {
    const path = file();
    const store = sqlitePersistence({ file: path, tenantKey });
    let list: Message[] = [said('one'), said('two', 'assistant')];
    await store.commit(scope, { envelope: withMessages(list, 1), basedOn: 0 }, c);
    const first = rows(path);
    assert.deepEqual(
      first.map((r) => r.content),
      ['one', 'two'],
    );
    list = [...list, said('three'), said('four', 'assistant')];
    await store.commit(scope, { envelope: withMessages(list, 2), basedOn: 1 }, c);
    const second = rows(path);
    assert.deepEqual(
      second.map((r) => [r.seq, r.content]),
      [
        [0, 'one'],
        [1, 'two'],
        [2, 'three'],
        [3, 'four'],
      ],
    );
    assert.deepEqual(
      second.slice(0, 2).map((r) => r.id),
      first.map((r) => r.id),
      'the first two messages were not written again',
    );
    assert.deepEqual(await contents(store), ['one', 'two', 'three', 'four']);
    await store.close();
  });

  it('a transcript that is not the last one written plus more (compacted, edited) is written whole', async () => {
    const path = file();
    const store = sqlitePersistence({ file: path, tenantKey });
    const a = said('a');
    await store.commit(scope, { envelope: withMessages([a, said('b')], 1), basedOn: 0 }, c);
    // Same length and first message, another second one: not a prefix.
    await store.commit(scope, { envelope: withMessages([a, said('B')], 2), basedOn: 1 }, c);
    assert.deepEqual(await contents(store), ['a', 'B']);
    // Shorter: a summary in place of the transcript.
    await store.commit(scope, { envelope: withMessages([said('summary')], 3), basedOn: 2 }, c);
    assert.deepEqual(await contents(store), ['summary']);
    assert.deepEqual(
      rows(path).map((r) => r.content),
      ['summary'],
    );
    await store.close();
  });

  it('after another store deleted and recreated the conversation at the same revision, a save is written whole (no rows of the other writer stay)', async () => {
    const path = file();
    const mine = sqlitePersistence({ file: path, tenantKey });
    const other = sqlitePersistence({ file: path, tenantKey });
    const m1 = said('mine 1');
    await mine.commit(scope, { envelope: withMessages([m1], 1), basedOn: 0 }, c);
    // The other store deletes it and writes its own conversation up to the same revision (1).
    assert.equal(await other.deleteConversation(scope, c), true);
    await other.commit(scope, { envelope: withMessages([said('theirs 1'), said('theirs 2')], 2), basedOn: 0 }, c);
    // This store's copy is based on revision 1 and starts with the message it wrote: the fence
    // lets it through (same revision), and the rows are the other writer's, so it writes them all.
    await mine.commit(scope, { envelope: withMessages([m1, said('mine 2')], 3), basedOn: 1 }, c);
    assert.deepEqual(await contents(other), ['mine 1', 'mine 2']);
    assert.deepEqual(
      rows(path).map((r) => r.content),
      ['mine 1', 'mine 2'],
    );
    await other.close();
    await mine.close();
  });

  it('a state read back goes on adding rows; one written by another store is written whole once', async () => {
    const path = file();
    const first = sqlitePersistence({ file: path, tenantKey });
    await first.commit(scope, { envelope: withMessages([said('x'), said('y')], 1), basedOn: 0 }, c);
    await first.close();
    const second = sqlitePersistence({ file: path, tenantKey });
    const loaded = await second.loadState(scope, c);
    assert.ok(loaded !== undefined);
    const list = [...loaded.state.messages, said('z')];
    await second.commit(scope, { envelope: withMessages(list, 2), basedOn: loaded.revision }, c);
    assert.deepEqual(await contents(second), ['x', 'y', 'z']);
    const again = await second.loadState(scope, c);
    assert.ok(again !== undefined);
    const ids = rows(path).map((r) => r.id);
    await second.commit(
      scope,
      { envelope: withMessages([...again.state.messages, said('w')], 3), basedOn: again.revision },
      c,
    );
    const after = rows(path);
    assert.deepEqual(
      after.map((r) => r.content),
      ['x', 'y', 'z', 'w'],
    );
    assert.deepEqual(
      after.slice(0, 3).map((r) => r.id),
      ids,
      'rows this store wrote are added to, not written again',
    );
    await second.close();
  });

  it('a missing or damaged message row is ERR_STORE_CORRUPT naming the state, not a shorter transcript', async () => {
    const path = file();
    const store = sqlitePersistence({ file: path, tenantKey });
    await store.commit(scope, { envelope: withMessages([said('p'), said('q'), said('r')], 1), basedOn: 0 }, c);
    const db = new Database(path);
    db.prepare('DELETE FROM state_messages WHERE seq = 1').run();
    await assert.rejects(store.loadState(scope, c), (e: Error & { code?: string }) => {
      assert.equal(e.code, 'ERR_STORE_CORRUPT');
      assert.match(e.message, /saved state of agent-1/);
      assert.match(e.message, /3 messages, but state_messages has 2 rows/);
      return true;
    });
    db.prepare(
      "INSERT INTO state_messages (tenant, conversation_id, agent_id, seq, json) VALUES ('acme', ?, ?, 1, 'not json')",
    ).run(c.conversationId, c.agentId);
    db.close();
    await assert.rejects(store.loadState(scope, c), (e: Error & { code?: string }) => {
      assert.equal(e.code, 'ERR_STORE_CORRUPT');
      assert.match(e.message, /message 2 of the saved state of agent-1/);
      return true;
    });
    await store.close();
  });
});
