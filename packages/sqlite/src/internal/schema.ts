import { closeSync, openSync, readSync } from 'node:fs';
import { TroupeError } from '@troupe/core';
import type Database from 'better-sqlite3';

/**
 * Numbered migrations, applied in order at open inside one transaction. A
 * migration is never edited once shipped: a change is a new entry. The
 * fixture database of every shipped version is checked in under
 * `test/src/persistence/fixtures/` and read by a test.
 *
 * Every table is keyed by `tenant` first (the integrator's tenant key); the
 * scope itself has no column anywhere. Rows hang off their conversation so a
 * deletion cascades. Tables holding JSON documents keep a rowid: a
 * `WITHOUT ROWID` table stores less of a large row per page, so a 10 KB
 * state would spill into more overflow pages.
 */
export const MIGRATIONS: readonly string[] = [
  // 1: the first schema.
  `
  CREATE TABLE troupe_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
  CREATE TABLE owners (
    owner_id TEXT PRIMARY KEY, pid INTEGER NOT NULL, pid_start TEXT NOT NULL, opened_at REAL NOT NULL
  ) WITHOUT ROWID;
  CREATE TABLE conversations (
    tenant TEXT NOT NULL, conversation_id TEXT NOT NULL,
    agent_id TEXT, agent_name TEXT, status TEXT, updated_at REAL,
    PRIMARY KEY (tenant, conversation_id)
  ) WITHOUT ROWID;
  CREATE INDEX conversations_by_time ON conversations (tenant, updated_at DESC, conversation_id);
  CREATE TABLE states (
    tenant TEXT NOT NULL, conversation_id TEXT NOT NULL, agent_id TEXT NOT NULL,
    version INTEGER NOT NULL, json TEXT NOT NULL,
    PRIMARY KEY (tenant, conversation_id, agent_id),
    FOREIGN KEY (tenant, conversation_id) REFERENCES conversations ON DELETE CASCADE
  );
  CREATE TABLE messages (
    id INTEGER PRIMARY KEY, tenant TEXT NOT NULL, conversation_id TEXT NOT NULL, agent_id TEXT NOT NULL,
    json TEXT NOT NULL,
    FOREIGN KEY (tenant, conversation_id) REFERENCES conversations ON DELETE CASCADE
  );
  CREATE INDEX messages_by_agent ON messages (tenant, conversation_id, agent_id, id);
  CREATE TABLE runs (
    tenant TEXT NOT NULL, run_id TEXT NOT NULL, conversation_id TEXT NOT NULL,
    status TEXT NOT NULL, attempt INTEGER NOT NULL, updated_at REAL NOT NULL, owner_id TEXT NOT NULL,
    json TEXT NOT NULL,
    PRIMARY KEY (tenant, run_id),
    FOREIGN KEY (tenant, conversation_id) REFERENCES conversations ON DELETE CASCADE
  );
  CREATE INDEX runs_by_conversation ON runs (tenant, conversation_id, status);
  CREATE INDEX runs_by_status ON runs (status, updated_at);
  CREATE TABLE tool_calls (
    tenant TEXT NOT NULL, run_id TEXT NOT NULL, tool_call_id TEXT NOT NULL, attempt INTEGER NOT NULL,
    conversation_id TEXT NOT NULL, tool_name TEXT NOT NULL, idempotent INTEGER NOT NULL,
    started_at REAL NOT NULL, status TEXT NOT NULL, committed_at REAL,
    PRIMARY KEY (tenant, run_id, tool_call_id, attempt),
    FOREIGN KEY (tenant, conversation_id) REFERENCES conversations ON DELETE CASCADE
  ) WITHOUT ROWID;
  CREATE INDEX tool_calls_by_conversation ON tool_calls (tenant, conversation_id);
  CREATE INDEX tool_calls_by_status ON tool_calls (status, committed_at);
  CREATE TABLE requests (
    tenant TEXT NOT NULL, request_id TEXT NOT NULL, conversation_id TEXT NOT NULL,
    status TEXT NOT NULL, opened_at REAL NOT NULL, closed_at REAL, json TEXT NOT NULL,
    PRIMARY KEY (tenant, request_id),
    FOREIGN KEY (tenant, conversation_id) REFERENCES conversations ON DELETE CASCADE
  );
  CREATE INDEX requests_open ON requests (tenant, status, opened_at, request_id);
  CREATE INDEX requests_by_conversation ON requests (tenant, conversation_id, status);
  CREATE INDEX requests_closed ON requests (status, closed_at);
  `,
];

/** The schema version this code creates and reads: the number of migrations. */
export const SCHEMA_VERSION = MIGRATIONS.length;

/** What marks a database as Troupe's (in `troupe_meta`). */
const FORMAT = 'troupe-persistence';

const SQLITE_HEADER = Buffer.from('SQLite format 3\u0000', 'latin1');

/**
 * Refuse a file that is not an SQLite database before SQLite opens it: a
 * random or truncated file would otherwise only fail at the first query.
 */
export function checkHeader(file: string): void {
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch {
    return; // missing (created fresh) or unreadable (SQLite's open reports it)
  }
  try {
    const head = Buffer.alloc(SQLITE_HEADER.length);
    const n = readSync(fd, head, 0, head.length, 0);
    if (n === 0) return; // an empty file is a fresh database
    if (n < head.length || !head.equals(SQLITE_HEADER)) {
      throw new TroupeError(
        `${file} is not an SQLite database (its header is wrong: damaged or another kind of file): pass another file, or restore it from a backup`,
        { code: 'ERR_STORE_CORRUPT' },
      );
    }
  } finally {
    closeSync(fd);
  }
}

/**
 * Bring the schema of an open database to {@link SCHEMA_VERSION} in one
 * transaction, or refuse it: a non-Troupe database (`ERR_STORE_CORRUPT`), a
 * schema newer than this code (`ERR_STORE_VERSION`).
 */
export function migrate(db: Database.Database, file: string): void {
  db.transaction(() => {
    const tables = new Set(
      (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").pluck().all() as string[]).filter(
        (n) => !n.startsWith('sqlite_'),
      ),
    );
    let current = 0;
    if (tables.size > 0) {
      const format = tables.has('troupe_meta')
        ? db.prepare("SELECT value FROM troupe_meta WHERE key = 'format'").pluck().get()
        : undefined;
      if (format !== FORMAT || !tables.has('schema_version')) {
        throw new TroupeError(
          `${file} is an SQLite database, but not a Troupe store (its tables: ${[...tables].slice(0, 5).join(', ')}): pass a new file or a Troupe store`,
          { code: 'ERR_STORE_CORRUPT' },
        );
      }
      current = Number(db.prepare('SELECT max(version) FROM schema_version').pluck().get() ?? 0);
    }
    if (current > SCHEMA_VERSION) {
      throw new TroupeError(
        `${file} has schema version ${current}, newer than this Troupe's ${SCHEMA_VERSION}: open it with the newer Troupe that wrote it`,
        { code: 'ERR_STORE_VERSION' },
      );
    }
    if (current === 0) {
      db.exec('CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at REAL NOT NULL)');
    }
    for (let v = current + 1; v <= SCHEMA_VERSION; v++) {
      db.exec(MIGRATIONS[v - 1] as string);
      if (v === 1) db.prepare("INSERT INTO troupe_meta (key, value) VALUES ('format', ?)").run(FORMAT);
      db.prepare('INSERT INTO schema_version (version, applied_at) VALUES (?, ?)').run(v, Date.now());
    }
  }).immediate();
}
