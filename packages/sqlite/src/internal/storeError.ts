import { isTroupeError, TroupeError } from '@troupe/core';

/** SQLite's words for a schema or a row that is not what Troupe wrote. */
const DAMAGED = /no such (table|column|index)|has no column named|malformed JSON|already exists/;

/**
 * Map what SQLite throws to a typed `TroupeError` naming the file and what to
 * do. Troupe's own errors (a refused record, a fenced run) pass through.
 * better-sqlite3 rolls a failed transaction back before this runs, so
 * nothing of a failed write is visible afterwards.
 */
export function storeError(
  error: unknown,
  file: string,
  operation: string,
  kind: 'read' | 'write' = 'write',
): TroupeError {
  if (isTroupeError(error)) return error;
  const code = typeof (error as { code?: unknown })?.code === 'string' ? (error as { code: string }).code : '';
  const reason = (error as Error)?.message ?? String(error);
  if (!code.startsWith('SQLITE_') && (error as NodeJS.ErrnoException)?.syscall === undefined) {
    // Not SQLite's nor the file system's: a defect of this store.
    return new TroupeError(`${operation} on ${file}: ${reason} (a bug of the store: please report it)`, {
      code: 'ERR_INTERNAL',
      cause: error,
    });
  }
  if (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')) {
    return new TroupeError(
      `${operation} on ${file}: the file stayed locked by another connection past busyTimeoutMs (${reason}): retry, or raise busyTimeoutMs`,
      { code: 'ERR_STORE_LOCKED', cause: error },
    );
  }
  // A table, column or index this code relies on is missing, or a row is not the JSON it holds:
  // the file was changed by something other than Troupe (or damaged), not refused a write.
  if (code === 'SQLITE_ERROR' && DAMAGED.test(reason)) {
    return new TroupeError(
      `${operation} on ${file}: the store's schema or data is damaged (${reason}): restore it from a backup, or pass a new file`,
      { code: 'ERR_STORE_CORRUPT', cause: error },
    );
  }
  if (code.startsWith('SQLITE_CORRUPT') || code === 'SQLITE_NOTADB') {
    return new TroupeError(`${operation} on ${file}: the database is damaged (${reason}): restore it from a backup`, {
      code: 'ERR_STORE_CORRUPT',
      cause: error,
    });
  }
  if (code === 'SQLITE_FULL') {
    return new TroupeError(
      `${operation} on ${file} failed: the disk is full (${reason}); nothing of it was saved: free space and retry`,
      {
        code: 'ERR_STORE_WRITE',
        cause: error,
      },
    );
  }
  if (code.startsWith('SQLITE_IOERR')) {
    return new TroupeError(
      `${operation} on ${file} failed: the file could not be written or read (${code}: ${reason}); nothing of it was saved: check that the file is writable and the disk healthy`,
      { code: 'ERR_STORE_WRITE', cause: error },
    );
  }
  if (code.startsWith('SQLITE_READONLY') || code === 'SQLITE_PERM' || code.startsWith('SQLITE_CANTOPEN')) {
    return new TroupeError(
      `${operation} on ${file} failed: the file or its directory cannot be written (${reason}); nothing of it was saved: make both writable`,
      { code: 'ERR_STORE_WRITE', cause: error },
    );
  }
  if (kind === 'read') {
    return new TroupeError(`${operation} on ${file} failed (${code || 'error'}: ${reason}): check the file`, {
      code: 'ERR_STORE_CORRUPT',
      cause: error,
    });
  }
  return new TroupeError(`${operation} on ${file} failed (${code || 'error'}: ${reason}); nothing of it was saved`, {
    code: 'ERR_STORE_WRITE',
    cause: error,
  });
}
