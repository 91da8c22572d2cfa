// Check a store of your own against the persistence contract: `node --test examples/dist/checkStore.js`.
import { MemoryPersistence } from '@troupe/supervisor';
import { runPersistenceContract } from '@troupe/supervisor/testing';

runPersistenceContract('MemoryPersistence', async (options) => ({
  store: new MemoryPersistence(options), // yours here: a fresh, empty store with the tenantKey given
  cleanup: async () => {}, // remove what it left after close(): files, a database schema
}));
