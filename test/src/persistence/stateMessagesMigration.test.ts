import assert from 'node:assert/strict';
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { sqlitePersistence } from '@troupe/sqlite';
import Database from 'better-sqlite3';
import { ctx } from './records.js';
import { tempDir } from './sqliteFiles.js';

// Review of migration 6: a schema-5 row whose seq is not an integer (an edited file) was read as
// ERR_STORE_CORRUPT for its state. After migration it must still be, and the file must still open.

const dirs: { remove(): void }[] = [];
after(() => {
  for (const d of dirs) d.remove();
});

function damagedFixture(sql: string): string {
  const d = tempDir('review-migration');
  dirs.push(d);
  const path = join(d.dir, 'troupe.sqlite');
  copyFileSync(fileURLToPath(new URL('../../src/persistence/fixtures/schema-5.sqlite', import.meta.url)), path);
  const raw = new Database(path);
  raw.prepare(sql).run();
  raw.close();
  return path;
}

describe('migration 6 of damaged schema-5 state rows', () => {
  for (const seq of [0, 1]) {
    it(`a row whose seq ${seq} is text opens and reads as ERR_STORE_CORRUPT (not a failed open, not a clean read)`, async () => {
      const path = damagedFixture(`UPDATE state_messages SET seq = 'x' WHERE seq = ${seq}`);
      const store = sqlitePersistence({ file: path, tenantKey: (s) => (s as { tenant: string }).tenant });
      try {
        await assert.rejects(
          store.loadState({ tenant: 'fixture-tenant' }, ctx('conversation-v2', 'agent-v2')),
          (e: Error & { code?: string }) => e.code === 'ERR_STORE_CORRUPT',
        );
      } finally {
        await store.close();
      }
    });
  }
});
