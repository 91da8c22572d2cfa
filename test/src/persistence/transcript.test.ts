// Issue 13, schema 5: a conversation's transcript is saved in chunks (one message's JSON per line,
// a chunk up to 2 KiB), so that a saved message rewrites its agent's last row instead of adding a
// row and an index entry. What a caller sees must not change: every message back, in order, with
// its exact value, whatever its size, however many one batch holds, and whichever agent saved it.
import assert from 'node:assert/strict';
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { Message } from '@troupe/core';
import { sqlitePersistence } from '@troupe/sqlite';
import Database from 'better-sqlite3';
import { ctx, envelope, scopeOf, tenantKey } from './records.js';
import { tempDir } from './sqliteFiles.js';

const CHUNK_BYTES = 2048; // MESSAGE_CHUNK_BYTES in packages/sqlite/src/internal/statements.ts
const dirs: { remove(): void }[] = [];
after(() => {
  for (const d of dirs) d.remove();
});
const scope = scopeOf('t1');

function fresh(): { file: string } {
  const d = tempDir('transcript');
  dirs.push(d);
  return { file: join(d.dir, 'troupe.sqlite') };
}

/** Every chunk of the file, as SQLite holds it. */
function chunks(file: string): { agent: string; chunk: number; count: number; bytes: number; json: string }[] {
  const db = new Database(file, { readonly: true });
  try {
    return db
      .prepare(
        'SELECT agent_id AS agent, chunk, count, octet_length(json) AS bytes, json FROM messages ORDER BY agent_id, chunk',
      )
      .all() as { agent: string; chunk: number; count: number; bytes: number; json: string }[];
  } finally {
    db.close();
  }
}

/** Messages of sizes around the chunk's bound, multi-byte text, newlines and quotes in content. */
function varied(n: number, tag: string): Message[] {
  const sizes = [5, 40, 700, 1500, 2040, 2100, 5000, 30];
  return Array.from({ length: n }, (_, i) => ({
    role: i % 2 === 0 ? 'user' : 'assistant',
    content: `${tag} ${i}: ${'ü€"\n\\'.repeat(1 + Math.floor((sizes[i % sizes.length] as number) / 5))}`,
  }));
}

describe('SqlitePersistence: the transcript in chunks', () => {
  it('one message a save: every message back in order and exact; chunks within 2 KiB unless one message is longer', async () => {
    const { file } = fresh();
    const store = sqlitePersistence({ file, tenantKey });
    const c = ctx('c1');
    const said = varied(40, 'one');
    for (const m of said) await store.saveMessage(scope, m, c);
    assert.deepEqual(await store.loadMessages(scope, c), said);
    await store.close();
    const rows = chunks(file);
    assert.equal(
      rows.reduce((n, r) => n + r.count, 0),
      said.length,
    );
    assert.ok(rows.length < said.length, `small messages share chunks (${rows.length} chunks for ${said.length})`);
    for (const r of rows) {
      assert.ok(r.count === 1 || r.bytes <= CHUNK_BYTES, `chunk ${r.chunk}: ${r.count} messages in ${r.bytes} bytes`);
      assert.equal(r.json.split('\n').length, r.count + 1);
    }
    assert.deepEqual(
      rows.map((r) => r.chunk),
      rows.map((_, i) => i + 1),
    );
  });

  it('a batch of many messages in one commit splits across chunks, and the next save appends after them', async () => {
    const { file } = fresh();
    const store = sqlitePersistence({ file, tenantKey });
    const c = ctx('c2');
    const batch = varied(30, 'batch');
    await store.commit(scope, { envelope: envelope(c), messages: batch }, c);
    const next: Message = { role: 'user', content: 'after the batch' };
    await store.commit(scope, { messages: [next] }, c);
    assert.deepEqual(await store.loadMessages(scope, c), [...batch, next]);
    await store.close();
    const rows = chunks(file);
    assert.ok(rows.length > 1);
    for (const r of rows) assert.ok(r.count === 1 || r.bytes <= CHUNK_BYTES);
  });

  it('each agent of a conversation has a transcript of its own, and deleting the conversation deletes every chunk', async () => {
    const { file } = fresh();
    const store = sqlitePersistence({ file, tenantKey });
    const parent = ctx('c3', 'agent-parent');
    const child = ctx('c3', 'agent-child');
    const forParent = varied(12, 'parent');
    const forChild = varied(12, 'child');
    for (let i = 0; i < 12; i++) {
      await store.saveMessage(scope, forParent[i] as Message, parent);
      await store.saveMessage(scope, forChild[i] as Message, child);
    }
    assert.deepEqual(await store.loadMessages(scope, parent), forParent);
    assert.deepEqual(await store.loadMessages(scope, child), forChild);
    // Another tenant's scope reads nothing of them.
    assert.deepEqual(await store.loadMessages(scopeOf('t2'), parent), []);
    await store.deleteConversation(scope, parent);
    assert.deepEqual(await store.loadMessages(scope, parent), []);
    await store.close();
    assert.equal(chunks(file).length, 0);
  });

  it('a failed commit appends nothing: the chunk it would have grown is as it was', async () => {
    const { file } = fresh();
    const store = sqlitePersistence({ file, tenantKey });
    const c = ctx('c4');
    await store.commit(scope, { envelope: envelope(c), messages: [{ role: 'user', content: 'kept' }] }, c);
    // Based on a revision that is not the saved one: the whole batch is refused.
    await assert.rejects(
      store.commit(scope, { envelope: envelope(c), messages: [{ role: 'user', content: 'lost' }], basedOn: 7 }, c),
      (error: unknown) => (error as { code?: string }).code === 'ERR_STORE_FENCED',
    );
    assert.deepEqual(
      (await store.loadMessages(scope, c)).map((m) => m.content),
      ['kept'],
    );
    await store.close();
  });

  it('a schema 4 file: its message rows become chunks, a raw newline in one (whitespace in JSON) reads as the same value', async () => {
    const { file } = fresh();
    copyFileSync(fileURLToPath(new URL('../../src/persistence/fixtures/schema-4.sqlite', import.meta.url)), file);
    const raw = new Database(file);
    raw
      .prepare("UPDATE messages SET json = ? WHERE json LIKE '%refund order 7%'")
      .run('{\n  "role": "user",\n  "content": "refund order 7\\nsecond line"\n}');
    raw.close();
    const store = sqlitePersistence({ file, tenantKey: (s) => (s as { tenant: string }).tenant });
    const fixture = { tenant: 'fixture-tenant' };
    const c = ctx('conversation-v2', 'agent-v2');
    assert.deepEqual(await store.loadMessages(fixture, c), [
      { role: 'user', content: 'refund order 7\nsecond line' },
      { role: 'assistant', content: 'asking a person' },
    ]);
    await store.saveMessage(fixture, { role: 'user', content: 'third' }, c);
    assert.deepEqual(
      (await store.loadMessages(fixture, c)).map((m) => m.content),
      ['refund order 7\nsecond line', 'asking a person', 'third'],
    );
    await store.close();
  });

  // Review of fc57da4: replace(json, char(10), ' ') is right for valid JSON only (a raw newline is
  // whitespace between tokens there). A row schema 4 could not read — a raw newline inside a string,
  // which JSON forbids, or a blob — was ERR_STORE_CORRUPT; the migration must not turn it into a
  // message that reads, with content it never had.
  for (const [what, value] of [
    ['a raw newline inside a string (not JSON)', '{"role":"user","content":"refund\norder 7"}'],
    ['a blob, not text', Buffer.from('{"role":"user","content":"refund order 7"}')],
  ] as const) {
    it(`a schema 4 message row schema 4 could not read (${what}) is still ERR_STORE_CORRUPT after the migration`, async () => {
      const { file } = fresh();
      copyFileSync(fileURLToPath(new URL('../../src/persistence/fixtures/schema-4.sqlite', import.meta.url)), file);
      const raw = new Database(file);
      raw.prepare("UPDATE messages SET json = ? WHERE json LIKE '%refund order 7%'").run(value);
      raw.close();
      const store = sqlitePersistence({ file, tenantKey: (s) => (s as { tenant: string }).tenant });
      await assert.rejects(
        store.loadMessages({ tenant: 'fixture-tenant' }, ctx('conversation-v2', 'agent-v2')),
        (error: unknown) => (error as { code?: string }).code === 'ERR_STORE_CORRUPT',
      );
      await store.close();
    });
  }
});
