// Hostile-checker findings: createSupervisor options that are wrong but are
// taken silently (or fail with an untyped TypeError), while pool options are
// checked strictly (an unknown pool key is refused).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { it } from 'node:test';
import { InvalidArgumentError } from '@troupe/core';
import { sqlitePersistence } from '@troupe/sqlite';
import { createSupervisor, type SupervisorOptions } from '@troupe/supervisor';

const refused = (options: unknown): void => {
  assert.throws(
    () => createSupervisor(options as SupervisorOptions),
    (e: unknown) => e instanceof InvalidArgumentError,
    `accepted ${JSON.stringify(options)}`,
  );
};

it('control: an unknown pool option is refused', () => {
  refused({ pool: { thread: 1 } });
});

it('restart: an unknown key (a misspelt maxRestarts) or a non-object is refused, not ignored', () => {
  refused({ pool: { threads: 1 }, restart: { intensity: 2 } });
  refused({ pool: { threads: 1 }, restart: 5 });
});

it('agents: a non-array is refused with an InvalidArgumentError, not a TypeError', () => {
  refused({ pool: { threads: 1 }, agents: 5 });
});

it("the persistence hint in the supervisor's error names an option sqlitePersistence accepts", async () => {
  // Supervisor's TSDoc and its error for a bad `persistence` say `sqlitePersistence({ path })`;
  // sqlitePersistence takes `file` or `directory`. Either the hint or the option must change.
  let message = '';
  try {
    createSupervisor({ pool: { threads: 1 }, persistence: 5 as never });
  } catch (e) {
    message = (e as Error).message;
  }
  const hinted = /sqlitePersistence\(\{ (\w+) \}\)/.exec(message)?.[1];
  if (hinted === undefined) return;
  const dir = mkdtempSync(join(tmpdir(), 'troupe-options-'));
  try {
    const store = sqlitePersistence({ [hinted]: join(dir, 'store.sqlite') } as never);
    await store.close?.();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
