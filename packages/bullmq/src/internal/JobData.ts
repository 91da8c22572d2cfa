import { z } from 'zod';
import { NAME } from './clusterSchema.js';

/** The version of a job's data; a worker host refuses another (`ERR_VERSION_SKEW`). */
export const JOB_VERSION = 1;

/**
 * What a BullMQ job carries: one attempt of one run, by reference. Never the
 * scope, the toolContext or the capability (Redis persists job data; those
 * come in the grant, over pub/sub, to the host that claimed the attempt).
 */
export const JobData = z.strictObject({
  v: z.number().int(),
  runId: z.string().min(1).max(256),
  attempt: z.number().int().min(1),
  /** The API host that owns the run: where the claim goes. */
  owner: z.string().regex(NAME),
  /** One-time: the claim presents it; the owner grants it once. */
  nonce: z.string().min(16).max(64),
  /** The agent's logical id (each worker host maps it to its own module). */
  agent: z.string().regex(NAME),
  build: z.string().regex(NAME),
  /** W3C trace context of the run on the API host, when traced. */
  traceparent: z.string().max(128).optional(),
});
/** See the {@link JobData} schema. */
export type JobData = z.infer<typeof JobData>;

/**
 * The job of one attempt: `<runId>.<attempt>`, and `<runId>.<attempt>.<leg>` when the API host
 * queued the same attempt again (lost before any of its tools started). BullMQ refuses a second
 * job of one id.
 */
export function jobIdOf(runId: string, attempt: number, leg = 1): string {
  return leg === 1 ? `${runId}.${attempt}` : `${runId}.${attempt}.${leg}`;
}
