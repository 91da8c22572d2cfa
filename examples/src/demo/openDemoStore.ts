import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { type SqlitePersistence, sqlitePersistence } from '@troupe/sqlite';

/** The demo cannot keep its database where it was told to. */
export class DemoDirError extends Error {
  override readonly name = 'DemoDirError';
}

/** The demo's store, and whether an earlier run left the file. */
export interface DemoStore {
  readonly store: SqlitePersistence;
  readonly file: string;
  /** True when the file was there before this run. */
  readonly existed: boolean;
}

/**
 * Open (or create) `troupe.sqlite` in `dir`. A directory that cannot be
 * created or written is a {@link DemoDirError} naming it and saying how to
 * pick another.
 */
export function openDemoStore(dir: string, howToChange: string): DemoStore {
  const file = join(dir, 'troupe.sqlite');
  const existed = existsSync(file) && statSync(file).size > 0;
  try {
    return { store: sqlitePersistence({ directory: dir }), file, existed };
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new DemoDirError(
      `the demo cannot keep its database in ${dir}: ${reason}. Pick a writable directory: ${howToChange}`,
      { cause: error },
    );
  }
}
