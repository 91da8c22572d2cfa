import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { after, describe, it } from 'node:test';
import { isTroupeError } from '@troupe/core';
import { SCHEMA_VERSION, sqlitePersistence } from '@troupe/sqlite';
import Database from 'better-sqlite3';
import { call, ctx, envelope, request, run, scopeOf, tenantKey } from './records.js';
import { tempDir } from './sqliteFiles.js';

const dirs: { remove(): void }[] = [];
after(() => {
  for (const d of dirs) d.remove();
});
function file(name = 'store.sqlite'): string {
  const d = tempDir('file');
  dirs.push(d);
  return join(d.dir, name);
}

function opens(path: string, code: string, pattern: RegExp): void {
  assert.throws(
    () => sqlitePersistence({ file: path }),
    (e: unknown) =>
      isTroupeError(e, code as never) && (e as Error).message.includes(path) && pattern.test((e as Error).message),
  );
}

describe('SqlitePersistence: the scope is never stored', () => {
  it('after every operation, no table, column or byte of the db, -wal and -shm files holds the scope’s values', async () => {
    const path = file();
    const secret = `tenantSecret-${randomBytes(12).toString('hex')}`;
    const email = `user-${randomBytes(8).toString('hex')}@example.test`;
    const scope = { tenant: 'tenant-a', tenantSecret: secret, user: { email } };
    const store = sqlitePersistence({ file: path, tenantKey });
    const c = ctx('c1');
    await store.startToolCalls(scope, [call('r1', 'k1')], c);
    await store.commit(
      scope,
      {
        envelope: envelope(c),
        messages: [{ role: 'user', content: 'hi' }],
        runs: [run(c, 'r1'), run(c, 'r2', { status: 'done', updatedAt: 1 })],
        committedToolCalls: [{ runId: 'r1', toolCallId: 'k1', attempt: 1 }],
        openedRequests: [request(c, 'q1'), request(c, 'q2')],
      },
      c,
    );
    await store.saveMessage(scope, { role: 'assistant', content: 'yes' }, c);
    await store.answerRequest(scope, 'q1', { id: 'local-q1', ok: true }, 5);
    await store.withdrawRequest(scope, 'q2', 6);
    await store.loadState(scope, c);
    await store.loadRuns(scope, c);
    await store.listConversations(scope);
    await store.listRequests(scope);
    await store.markInterrupted({ scope });
    await store.prune({ finishedRunsOlderThanMs: 0, now: 10, scope });
    // Scan while open: the WAL holds the latest writes.
    const files = [path, `${path}-wal`, `${path}-shm`].filter((f) => existsSync(f));
    assert.ok(files.includes(`${path}-wal`), 'the WAL is there to scan');
    for (const f of files) {
      const bytes = readFileSync(f);
      for (const needle of [secret, email]) {
        assert.equal(bytes.indexOf(Buffer.from(needle, 'utf8')), -1, `${needle} found in ${f}`);
        assert.equal(bytes.indexOf(Buffer.from(needle, 'utf16le')), -1, `${needle} found in ${f} (UTF-16)`);
      }
    }
    const raw = new Database(path, { readonly: true });
    let cells = 0;
    for (const table of raw.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").pluck().all() as string[]) {
      for (const row of raw.prepare(`SELECT * FROM "${table}"`).raw().all() as unknown[][]) {
        for (const cell of row) {
          cells++;
          assert.ok(!String(cell).includes(secret) && !String(cell).includes(email), `scope value in ${table}`);
        }
      }
    }
    raw.close();
    assert.ok(cells > 40, `scanned ${cells} cells`);
    await store.close();
  });
});

describe('SqlitePersistence: opening a file', () => {
  it('refuses a file of random bytes with ERR_STORE_CORRUPT naming the file', () => {
    const path = file();
    writeFileSync(path, randomBytes(8192));
    opens(path, 'ERR_STORE_CORRUPT', /not an SQLite database/);
  });

  it('refuses a file with an SQLite header and garbage after it with ERR_STORE_CORRUPT', () => {
    const path = file();
    writeFileSync(path, Buffer.concat([Buffer.from('SQLite format 3\u0000', 'latin1'), randomBytes(8192)]));
    opens(path, 'ERR_STORE_CORRUPT', /damaged|not a/);
  });

  it('refuses an SQLite database that is not a Troupe store with ERR_STORE_CORRUPT', () => {
    const path = file();
    const other = new Database(path);
    other.exec('CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL); INSERT INTO invoices VALUES (1, 9.5)');
    other.close();
    opens(path, 'ERR_STORE_CORRUPT', /not a Troupe store.*invoices/);
    const again = new Database(path, { readonly: true });
    assert.equal(again.prepare('SELECT count(*) FROM invoices').pluck().get(), 1, 'the foreign file is left as it was');
    again.close();
  });

  // Issue 31, item 7: the refusal came after `journal_mode = WAL`, which rewrote the file's header
  // and left -wal/-shm beside it. Every file in the directory, byte for byte, is compared.
  describe('a refused file is left byte-for-byte as it was, with no -wal or -shm made', () => {
    function snapshot(path: string): Map<string, string> {
      const dir = dirname(path);
      return new Map(readdirSync(dir).map((name) => [name, readFileSync(join(dir, name)).toString('base64')]));
    }
    function refusedAsItWas(path: string, code: string, pattern: RegExp): void {
      const before = snapshot(path);
      opens(path, code, pattern);
      const after = snapshot(path);
      assert.deepEqual([...after.keys()].sort(), [...before.keys()].sort(), 'no file made or removed beside it');
      for (const [name, bytes] of before) assert.ok(after.get(name) === bytes, `${name} changed`);
    }
    for (const mode of ['DELETE', 'TRUNCATE', 'PERSIST', 'WAL']) {
      it(`another application's database in journal_mode ${mode}`, () => {
        const path = file('app.db');
        const other = new Database(path);
        other.pragma(`journal_mode = ${mode}`);
        other.exec('CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL); INSERT INTO invoices VALUES (1, 9.5)');
        other.close();
        refusedAsItWas(path, 'ERR_STORE_CORRUPT', /not a Troupe store.*invoices/);
      });
    }
    it('a Troupe store of a newer schema', async () => {
      const path = file();
      await sqlitePersistence({ file: path }).close();
      const raw = new Database(path);
      raw.pragma('journal_mode = DELETE');
      raw.prepare('INSERT INTO schema_version (version, applied_at) VALUES (?, 0)').run(SCHEMA_VERSION + 1);
      raw.close();
      refusedAsItWas(path, 'ERR_STORE_VERSION', /newer than this Troupe's/);
    });
    it('an SQLite header with garbage after it', () => {
      const path = file();
      writeFileSync(path, Buffer.concat([Buffer.from('SQLite format 3\u0000', 'latin1'), randomBytes(8192)]));
      refusedAsItWas(path, 'ERR_STORE_CORRUPT', /damaged|not a/);
    });
  });

  it('refuses a schema newer than this code with ERR_STORE_VERSION', async () => {
    const path = file();
    await sqlitePersistence({ file: path }).close();
    const raw = new Database(path);
    raw.prepare('INSERT INTO schema_version (version, applied_at) VALUES (?, 0)').run(SCHEMA_VERSION + 1);
    raw.close();
    opens(
      path,
      'ERR_STORE_VERSION',
      new RegExp(`schema version ${SCHEMA_VERSION + 1}, newer than this Troupe's ${SCHEMA_VERSION}`),
    );
  });

  it('refuses, on load, an envelope of a version newer than this code with ERR_STORE_VERSION', async () => {
    const path = file();
    const store = sqlitePersistence({ file: path });
    const c = ctx('c1');
    await store.persistState({}, envelope(c), c);
    const raw = new Database(path);
    raw.prepare("UPDATE states SET json = json_set(json, '$.version', 99)").run();
    raw.close();
    await assert.rejects(
      store.loadState({}, c),
      (e) => isTroupeError(e, 'ERR_STORE_VERSION') && /version 99/.test((e as Error).message),
    );
    await store.close();
  });

  it('creates the schema with WAL and a version row per migration', async () => {
    const path = file();
    await sqlitePersistence({ file: path }).close();
    const raw = new Database(path, { readonly: true });
    assert.equal(raw.pragma('journal_mode', { simple: true }), 'wal');
    assert.deepEqual(
      raw.prepare('SELECT version FROM schema_version ORDER BY version').pluck().all(),
      Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1),
    );
    raw.close();
  });

  it('keeps everything across a close and a reopen', async () => {
    const path = file();
    const scope = scopeOf('t1');
    const c = ctx('c1');
    const first = sqlitePersistence({ file: path, tenantKey });
    await first.commit(
      scope,
      {
        envelope: envelope(c, { status: 'suspended' }),
        runs: [run(c, 'r1', { status: 'suspended' })],
        openedRequests: [request(c, 'q1')],
      },
      c,
    );
    await first.close();
    const second = sqlitePersistence({ file: path, tenantKey });
    assert.equal((await second.loadState(scope, c))?.status, 'suspended');
    assert.deepEqual(
      (await second.loadRuns(scope, c)).map((r) => r.runId),
      ['r1'],
    );
    assert.equal((await second.answerRequest(scope, 'q1', { id: 'x', ok: true }, 1)).status, 'taken');
    await second.close();
  });

  it('with { directory } creates it and keeps troupe.sqlite in it', async () => {
    const dir = join(file('unused'), '..', 'nested', 'deeper');
    const store = sqlitePersistence({ directory: dir });
    assert.equal(store.file, join(dir, 'troupe.sqlite'));
    await store.close();
    assert.ok(existsSync(join(dir, 'troupe.sqlite')));
  });

  it('refuses options naming both or neither of file and directory', () => {
    assert.throws(() => sqlitePersistence({} as never), /exactly one of file or directory/);
    assert.throws(() => sqlitePersistence({ file: 'a', directory: 'b' }), /exactly one of file or directory/);
  });

  it('refuses a synchronous other than NORMAL or FULL', () => {
    assert.throws(
      () => sqlitePersistence({ file: file(), synchronous: 'OFF' as never }),
      /synchronous must be 'NORMAL' or 'FULL'/,
    );
  });

  it('refuses a busyTimeoutMs that is not an integer ≥ 0', () => {
    assert.throws(() => sqlitePersistence({ file: file(), busyTimeoutMs: -1 }), /busyTimeoutMs/);
  });
});
