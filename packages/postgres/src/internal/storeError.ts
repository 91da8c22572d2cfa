import { isTroupeError, TroupeError } from '@troupe/core';

/**
 * Where a PostgreSQL store is — host, port, database, user and schema — as its errors name it
 * (never the password).
 *
 * @example
 * ```ts
 * const store = await postgresPersistence({ connectionString: 'postgres://troupe:secret@db.internal:5432/app' })
 * const where: StoreAddress = store.address // { host: 'db.internal', port: 5432, database: 'app', user: 'troupe', schema: 'public' }
 * ```
 */
export interface StoreAddress {
  readonly host: string;
  readonly port: number | undefined;
  readonly database: string;
  readonly user: string;
  readonly schema: string;
}

/** `host:port/database (schema s)`. */
export function describeAddress(a: StoreAddress): string {
  return `PostgreSQL ${a.host}${a.port === undefined ? '' : `:${a.port}`}/${a.database} (schema ${a.schema})`;
}

// Node's errors of a connection that could not be made or was lost.
const NETWORK = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'EPIPE']);

/** True for an error that says the server is gone or cannot be reached (the connection is not reusable). */
export function isConnectionError(error: unknown): boolean {
  const code = (error as { code?: unknown })?.code;
  if (typeof code === 'string') {
    if (NETWORK.has(code)) return true;
    // 08: connection exception; 57P01-57P03: the server shut down or is starting.
    if (code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03') return true;
  }
  const message = (error as Error)?.message ?? '';
  return /Connection terminated|connection timeout|Client has encountered a connection error|not queryable/i.test(
    message,
  );
}

/**
 * Map what pg throws to a typed `TroupeError` naming the server, database and what to do (never
 * the password). Troupe's own errors (a refused record, a fenced run) pass through. A transaction
 * that failed was rolled back, so nothing of it is visible afterwards — except a COMMIT whose
 * connection was lost before the server answered: it may have been saved, and the next save based
 * on the revision before it is then fenced.
 */
export function storeError(
  error: unknown,
  address: StoreAddress,
  operation: string,
  kind: 'read' | 'write' = 'write',
): TroupeError {
  if (isTroupeError(error)) return error;
  const where = describeAddress(address);
  const code = typeof (error as { code?: unknown })?.code === 'string' ? (error as { code: string }).code : '';
  const reason = (error as Error)?.message ?? String(error);
  if (code === '28P01' || code === '28000') {
    return new TroupeError(
      `${operation} on ${where}: the server refused the login of role ${address.user} (${reason}): check the user and password of the connection string`,
      { code: 'ERR_STORE_UNREACHABLE', cause: error },
    );
  }
  if (code === '3D000') {
    return new TroupeError(
      `${operation} on ${where}: the database ${address.database} does not exist: create it (CREATE DATABASE), or pass the URL of one that does`,
      { code: 'ERR_STORE_UNREACHABLE', cause: error },
    );
  }
  if (isConnectionError(error)) {
    return new TroupeError(
      `${operation} on ${where}: the server could not be reached or went away (${code || 'connection'}: ${reason}); ${kind === 'write' ? 'nothing of it was acknowledged: retry once the server is back' : 'retry once the server is back'}`,
      { code: 'ERR_STORE_UNREACHABLE', cause: error },
    );
  }
  if (code === '42501' || code === '25006') {
    return new TroupeError(
      `${operation} on ${where} failed: role ${address.user} may not write there (${reason}); nothing of it was saved: grant it INSERT, UPDATE and DELETE on the store's tables, or connect as a role that has them`,
      { code: 'ERR_STORE_WRITE', cause: error },
    );
  }
  if (code === '40001' || code === '40P01' || code === '55P03') {
    return new TroupeError(
      `${operation} on ${where}: the transaction lost a race with another writer (${code}: ${reason}); nothing of it was saved: retry`,
      { code: 'ERR_STORE_LOCKED', cause: error },
    );
  }
  // A table or column this code relies on is missing: the schema was changed by something other than Troupe.
  if (code === '42P01' || code === '42703' || code === '42883') {
    return new TroupeError(
      `${operation} on ${where}: the store's schema is damaged (${reason}): restore it from a backup, or pass another schema`,
      { code: 'ERR_STORE_CORRUPT', cause: error },
    );
  }
  if (code === '53100' || code === '53200' || code === '53300' || code.startsWith('58')) {
    return new TroupeError(
      `${operation} on ${where} failed: the server is out of resources (${code}: ${reason}); nothing of it was saved: retry later`,
      { code: 'ERR_STORE_WRITE', cause: error },
    );
  }
  if (code === '') {
    return new TroupeError(`${operation} on ${where}: ${reason} (a bug of the store: please report it)`, {
      code: 'ERR_INTERNAL',
      cause: error,
    });
  }
  if (kind === 'read') {
    return new TroupeError(`${operation} on ${where} failed (${code}: ${reason})`, {
      code: 'ERR_STORE_CORRUPT',
      cause: error,
    });
  }
  return new TroupeError(`${operation} on ${where} failed (${code}: ${reason}); nothing of it was saved`, {
    code: 'ERR_STORE_WRITE',
    cause: error,
  });
}
