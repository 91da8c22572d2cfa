import { existsSync, mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { InvalidArgumentError, TroupeError } from '@troupe/core';
import { describeValue } from '@troupe/core/internal';
import Database from 'better-sqlite3';
import type { SqlitePersistenceOptions } from '../SqlitePersistenceOptions.js';
import { checkHeader, migrate, readSchemaVersion } from './schema.js';
import { storeError } from './storeError.js';

function isStoreError(error: unknown): boolean {
  const code = (error as { code?: unknown })?.code;
  return error instanceof TroupeError && (code === 'ERR_STORE_CORRUPT' || code === 'ERR_STORE_VERSION');
}

/**
 * Check the file options, then open the database: refuse a file that is not
 * a Troupe store (before anything is written to it: a refused file is left
 * byte-for-byte as it was), set WAL, `synchronous` and foreign keys, and
 * migrate the schema. Throws a typed error naming the file.
 */
export function openDatabase(
  options: Omit<SqlitePersistenceOptions, 'tenantKey'>,
  autocheckpointPages: number,
): { db: Database.Database; file: string; synchronous: 'NORMAL' | 'FULL' } {
  const { file: given, directory } = options;
  if ((given === undefined) === (directory === undefined)) {
    throw new InvalidArgumentError('sqlitePersistence: pass exactly one of file or directory');
  }
  for (const [name, value] of [
    ['file', given],
    ['directory', directory],
  ] as const) {
    if (value !== undefined && (typeof value !== 'string' || value.length === 0)) {
      throw new InvalidArgumentError(`sqlitePersistence: ${name} must be a non-empty path`);
    }
  }
  const synchronous = options.synchronous ?? 'NORMAL';
  if (synchronous !== 'NORMAL' && synchronous !== 'FULL') {
    throw new InvalidArgumentError(`synchronous must be 'NORMAL' or 'FULL', got ${describeValue(synchronous)}`);
  }
  const busy = options.busyTimeoutMs ?? 5000;
  if (!Number.isSafeInteger(busy) || busy < 0) throw new InvalidArgumentError('busyTimeoutMs must be an integer ≥ 0');
  if (directory !== undefined) {
    try {
      mkdirSync(directory, { recursive: true });
    } catch (error) {
      throw storeError(error, directory, 'creating the store directory');
    }
  }
  const file = resolve(directory === undefined ? (given as string) : join(directory, 'troupe.sqlite'));
  if (!existsSync(dirname(file))) {
    throw new TroupeError(
      `${file} cannot be created: its directory ${dirname(file)} does not exist; create it, or pass { directory } (created for you)`,
      { code: 'ERR_STORE_WRITE' },
    );
  }
  checkHeader(file);
  let db: Database.Database | undefined;
  try {
    db = new Database(file, { timeout: busy });
    // Identify the file by reading it before the first pragma that writes (journal_mode = WAL
    // rewrites the header and makes -wal/-shm): another application's database is refused as it was.
    readSchemaVersion(db, file);
    if (db.readonly) throw new TroupeError('read-only', { code: 'ERR_STORE_WRITE' });
    const mode = db.pragma('journal_mode = WAL', { simple: true });
    if (mode !== 'wal') throw new TroupeError(`journal_mode is ${String(mode)}, not wal`, { code: 'ERR_STORE_WRITE' });
    db.pragma(`synchronous = ${synchronous}`);
    db.pragma('foreign_keys = ON');
    // The checkpointer thread keeps the WAL short; this threshold (80 MiB)
    // only bounds it should that thread fall behind or fail.
    db.pragma(`wal_autocheckpoint = ${autocheckpointPages}`);
    migrate(db, file);
    return { db, file, synchronous };
  } catch (error) {
    db?.close();
    if (isStoreError(error)) throw error;
    if (error instanceof TroupeError && error.code === 'ERR_STORE_WRITE') {
      throw new TroupeError(
        `${file} cannot be written (${error.message}): make the file and its directory writable, or pass another file`,
        { code: 'ERR_STORE_WRITE' },
      );
    }
    throw storeError(error, file, 'opening the store');
  }
}
