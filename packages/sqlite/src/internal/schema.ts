import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { TroupeError } from '@troupe/core';
import type Database from 'better-sqlite3';
import { MIGRATIONS, SCHEMA_VERSION } from './migrations.js';

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
    if (fstatSync(fd).isDirectory()) {
      throw new TroupeError(
        `${file} is a directory, not a database file: pass the path of a file (created if missing), or pass it as { directory }`,
        { code: 'ERR_STORE_WRITE' },
      );
    }
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
 * Identify an open database by reading it only: the schema version of a
 * Troupe store, 0 for an empty database, or a typed refusal — a non-Troupe
 * database (`ERR_STORE_CORRUPT`), a damaged `schema_version`
 * (`ERR_STORE_CORRUPT`), a schema newer than this code (`ERR_STORE_VERSION`).
 *
 * {@link openDatabase} calls it before it sets any pragma, so a refused file
 * is left byte-for-byte as it was (no journal mode switched to WAL, no
 * `-wal`/`-shm` left behind: a connection that only read removes the ones it
 * made when it closes), and again inside the migration's transaction, where
 * the answer cannot change under it.
 */
export function readSchemaVersion(db: Database.Database, file: string): number {
  const tables = new Set(
    (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").pluck().all() as string[]).filter(
      (n) => !n.startsWith('sqlite_'),
    ),
  );
  if (tables.size === 0) return 0;
  const format = tables.has('troupe_meta')
    ? db.prepare("SELECT value FROM troupe_meta WHERE key = 'format'").pluck().get()
    : undefined;
  if (format !== FORMAT || !tables.has('schema_version')) {
    throw new TroupeError(
      `${file} is an SQLite database, but not a Troupe store (its tables: ${[...tables].slice(0, 5).join(', ')}): pass a new file or a Troupe store`,
      { code: 'ERR_STORE_CORRUPT' },
    );
  }
  const current = Number(db.prepare('SELECT max(version) FROM schema_version').pluck().get() ?? 0);
  if (!Number.isSafeInteger(current) || current < 1) {
    throw new TroupeError(
      `${file} is a Troupe store whose schema_version table is empty or damaged (it says ${String(current)}): its schema cannot be known; restore it from a backup`,
      { code: 'ERR_STORE_CORRUPT' },
    );
  }
  if (current > SCHEMA_VERSION) {
    throw new TroupeError(
      `${file} has schema version ${current}, newer than this Troupe's ${SCHEMA_VERSION}: open it with the newer Troupe that wrote it`,
      { code: 'ERR_STORE_VERSION' },
    );
  }
  return current;
}

/**
 * Bring the schema of an open database to {@link SCHEMA_VERSION} in one
 * transaction, or refuse it (see {@link readSchemaVersion}).
 */
export function migrate(db: Database.Database, file: string): void {
  db.transaction(() => {
    const current = readSchemaVersion(db, file);
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
