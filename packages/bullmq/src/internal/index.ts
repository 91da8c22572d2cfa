/**
 * @troupe/bullmq/internal — the wire under the public surface, for Troupe's
 * own tests and benchmarks (they play one end of the protocol against the
 * other over a real Redis). Not a stable API.
 */
export { decodeEnd, encodeEnd } from './EndWire.js';
export { JOB_VERSION, JobData, jobIdOf } from './JobData.js';
export { RedisNames } from './RedisNames.js';
export { RelayClient } from './RelayClient.js';
export {
  decodeToHost,
  decodeToOwner,
  encodeWire,
  type Grant,
  type RelayKind,
  type ToHost,
  type ToOwner,
  WIRE_VERSION,
} from './Wire.js';
