import assert from 'node:assert/strict';
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { Message } from '@troupe/core';
import { sealMessage } from '@troupe/core/internal';
import { sqlitePersistence } from '@troupe/sqlite';
import type { AgentStateEnvelope } from '@troupe/supervisor';
import Database from 'better-sqlite3';
import { ctx, envelope, loopState, scopeOf, tenantKey } from './records.js';
import { tempDir } from './sqliteFiles.js';

// A state's messages are rows of their own (chunks of lines, schema 6): a turn appends the messages
// it added to the state's last chunk, and a state that is not the one this store last wrote
// (another writer's, a rewritten transcript) is written whole again. What is read back is always
// exactly what was saved last.

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

/**
 * The state's messages as the file holds them, one entry a message: its chunk's row id and number,
 * its place, its content.
 */
function rows(path: string): { id: number; chunk: number; seq: number; content: string }[] {
  const db = new Database(path, { readonly: true });
  try {
    const chunks = db.prepare('SELECT rowid AS id, chunk, json FROM state_messages ORDER BY chunk').all() as {
      id: number;
      chunk: number;
      json: string;
    }[];
    const out: { id: number; chunk: number; seq: number; content: string }[] = [];
    for (const r of chunks) {
      for (const line of r.json.split('\n').slice(0, -1)) {
        out.push({
          id: r.id,
          chunk: r.chunk,
          seq: out.length,
          content: (JSON.parse(line) as Message).content as string,
        });
      }
    }
    return out;
  } finally {
    db.close();
  }
}

/**
 * Record every write to the state's chunks from now on (triggers in the file, so the store's own
 * connection fires them): what a save did, not only what it left.
 */
function watch(path: string): () => string[] {
  const db = new Database(path);
  db.exec(`
    CREATE TABLE IF NOT EXISTS chunk_writes (id INTEGER PRIMARY KEY, what TEXT NOT NULL);
    DELETE FROM chunk_writes;
    CREATE TRIGGER IF NOT EXISTS chunk_inserted AFTER INSERT ON state_messages
      BEGIN INSERT INTO chunk_writes (what) VALUES ('insert ' || new.chunk || ':' || new.count); END;
    CREATE TRIGGER IF NOT EXISTS chunk_updated AFTER UPDATE ON state_messages
      BEGIN INSERT INTO chunk_writes (what) VALUES ('update ' || new.chunk || ':' || old.count || '→' || new.count); END;
    CREATE TRIGGER IF NOT EXISTS chunk_deleted AFTER DELETE ON state_messages
      BEGIN INSERT INTO chunk_writes (what) VALUES ('delete ' || old.chunk); END;
  `);
  db.close();
  return () => {
    const read = new Database(path, { readonly: true });
    try {
      return read.prepare('SELECT what FROM chunk_writes ORDER BY id').pluck().all() as string[];
    } finally {
      read.close();
    }
  };
}

async function contents(store: ReturnType<typeof sqlitePersistence>): Promise<string[]> {
  const state = await store.loadState(scope, c);
  return (state?.state.messages ?? []).map((m) => m.content as string);
}

describe('a state’s messages in rows of their own (SQLite)', () => {
  it('a turn appends the messages it added to the last chunk; nothing before is deleted or written again', async () => {
    const path = file();
    const store = sqlitePersistence({ file: path, tenantKey });
    let list: Message[] = [said('one'), said('two', 'assistant')];
    await store.commit(scope, { envelope: withMessages(list, 1), basedOn: 0 }, c);
    assert.deepEqual(
      rows(path).map((r) => r.content),
      ['one', 'two'],
    );
    const writes = watch(path);
    list = [...list, said('three'), said('four', 'assistant')];
    await store.commit(scope, { envelope: withMessages(list, 2), basedOn: 1 }, c);
    assert.deepEqual(writes(), ['update 1:2→4'], 'one chunk grew in place');
    assert.deepEqual(
      rows(path).map((r) => [r.chunk, r.seq, r.content]),
      [
        [1, 0, 'one'],
        [1, 1, 'two'],
        [1, 2, 'three'],
        [1, 3, 'four'],
      ],
    );
    // Messages that do not fit the last chunk start the next one; the chunks before stay as they are.
    const long = 'x'.repeat(1900);
    list = [...list, said(long), said('five')];
    await store.commit(scope, { envelope: withMessages(list, 3), basedOn: 2 }, c);
    assert.deepEqual(writes(), ['update 1:2→4', 'insert 2:2']);
    assert.deepEqual(await contents(store), ['one', 'two', 'three', 'four', long, 'five']);
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
    const wholly = watch(path);
    const list = [...loaded.state.messages, said('z')];
    await second.commit(scope, { envelope: withMessages(list, 2), basedOn: loaded.revision }, c);
    assert.deepEqual(wholly(), ['delete 1', 'insert 1:3'], 'another store’s chunks are written whole, once');
    assert.deepEqual(await contents(second), ['x', 'y', 'z']);
    const again = await second.loadState(scope, c);
    assert.ok(again !== undefined);
    const writes = watch(path);
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
    assert.deepEqual(writes(), ['update 1:3→4'], 'chunks this store wrote are added to, not written again');
    await second.close();
  });

  it('a missing, emptied or damaged chunk of its messages is ERR_STORE_CORRUPT naming the state, not a shorter transcript', async () => {
    const path = file();
    const store = sqlitePersistence({ file: path, tenantKey });
    // Three messages too long to share a chunk: chunks 1, 2 and 3.
    const long = (t: string) => said(t.padEnd(1500, '.'));
    await store.commit(scope, { envelope: withMessages([long('p'), long('q'), long('r')], 1), basedOn: 0 }, c);
    const corrupt = (pattern: RegExp) => (e: Error & { code?: string }) => {
      assert.equal(e.code, 'ERR_STORE_CORRUPT');
      assert.match(e.message, /saved state of agent-1/);
      assert.match(e.message, pattern);
      return true;
    };
    const db = new Database(path);
    const saved = db.prepare('SELECT chunk, count, json FROM state_messages ORDER BY chunk').all() as {
      chunk: number;
      count: number;
      json: string;
    }[];
    assert.equal(saved.length, 3);
    const restore = () => {
      db.prepare('DELETE FROM state_messages').run();
      for (const r of saved) {
        db.prepare(
          "INSERT INTO state_messages (tenant, conversation_id, agent_id, chunk, count, json) VALUES ('acme', ?, ?, ?, ?, ?)",
        ).run(c.conversationId, c.agentId, r.chunk, r.count, r.json);
      }
    };
    db.prepare('DELETE FROM state_messages WHERE chunk = 2').run();
    await assert.rejects(store.loadState(scope, c), corrupt(/message 2 of the saved state .*chunk 2 is missing/));
    restore();
    db.prepare('DELETE FROM state_messages WHERE chunk = 3').run();
    await assert.rejects(store.loadState(scope, c), corrupt(/3 messages, but state_messages holds 2 for it/));
    restore();
    db.prepare("UPDATE state_messages SET count = 0, json = '' WHERE chunk = 2").run();
    await assert.rejects(store.loadState(scope, c), corrupt(/message 2 of the saved state .*holds 0 messages/));
    restore();
    db.prepare("UPDATE state_messages SET json = 'not json' || char(10) WHERE chunk = 2").run();
    await assert.rejects(store.loadState(scope, c), corrupt(/message 2 of the saved state of agent-1/));
    restore();
    assert.deepEqual(
      await contents(store),
      ['p', 'q', 'r'].map((t) => t.padEnd(1500, '.')),
    );
    db.close();
    await store.close();
  });

  it('schema 5 rows migrate to chunks of one by their place: a row missing before is a chunk missing after', async () => {
    const path = file();
    copyFileSync(fileURLToPath(new URL('../../src/persistence/fixtures/schema-5.sqlite', import.meta.url)), path);
    const raw = new Database(path);
    raw.prepare('DELETE FROM state_messages WHERE seq = 0').run();
    raw.close();
    const store = sqlitePersistence({ file: path, tenantKey: (s) => (s as { tenant: string }).tenant });
    await assert.rejects(
      store.loadState({ tenant: 'fixture-tenant' }, ctx('conversation-v2', 'agent-v2')),
      (e: Error & { code?: string }) => e.code === 'ERR_STORE_CORRUPT' && /chunk 1 is missing/.test(e.message),
    );
    await store.close();
  });
});
