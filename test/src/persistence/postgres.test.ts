import { runPersistenceContract } from '@troupe/supervisor/testing';
import { makePostgresStore } from './postgresStores.js';

runPersistenceContract('PostgresPersistence', makePostgresStore);
