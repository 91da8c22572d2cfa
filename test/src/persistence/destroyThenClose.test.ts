// Contract 9 and the @troupe/sqlite README: `close()` closes the store, `destroy()` and `close()`
// are idempotent. A host that tears down with destroy() and then calls close() (the
// `await using` path, or a shutdown hook) must not be left with the file open.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { isTroupeError } from '@troupe/core';
import { sqlitePersistence } from '@troupe/sqlite';
import { createSupervisor } from '@troupe/supervisor';
import { tempDir } from './sqliteFiles.js';

const dirs: { remove(): void }[] = [];
after(() => {
  for (const d of dirs) d.remove();
});

describe('destroy() then close()', () => {
  it('closes the store (later store calls reject with ERR_CLOSED)', async () => {
    const d = tempDir('destroy-close');
    dirs.push(d);
    const store = sqlitePersistence({ file: join(d.dir, 'troupe.sqlite') });
    const supervisor = createSupervisor({ persistence: store });
    await supervisor.destroy();
    await supervisor.close();
    try {
      await assert.rejects(store.listConversations({}), (e) => isTroupeError(e, 'ERR_CLOSED'));
    } finally {
      await store.close();
    }
  });
});
