/**
 * @troupe/supervisor/testing — suites that check an implementation of one of
 * Troupe's interfaces against every promise the supervisor relies on, on
 * `node:test`: run one against a transport (or a store) of your own.
 */

export { conformanceAgents } from './conformanceAgents.js';
export {
  type MakeStore,
  PersistenceFixtures,
  type StoreUnderTest,
  type TestScope,
} from './PersistenceFixtures.js';
export { runPersistenceContract } from './runPersistenceContract.js';
export { runTransportConformance, type TransportConformanceOptions } from './runTransportConformance.js';
