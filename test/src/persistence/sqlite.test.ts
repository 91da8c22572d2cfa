import { join } from 'node:path';
import { sqlitePersistence } from '@troupe/sqlite';
import { runPersistenceContract } from '@troupe/supervisor/testing';
import { tempDir } from './sqliteFiles.js';

runPersistenceContract('SqlitePersistence', async (options) => {
  const { dir, remove } = tempDir('contract');
  return { store: sqlitePersistence({ file: join(dir, 'store.sqlite'), ...options }), cleanup: async () => remove() };
});
