/**
 * The Redis keys and pub/sub channels of one queue, beside BullMQ's own
 * (`<prefix>:<queue>:wait`, `<prefix>:<queue>:<jobId>`...). Troupe's own names
 * put a `~` after the queue, which no job id starts with (a job id is
 * `<runId>.<attempt>`, and run ids are `run_...`).
 */
export class RedisNames {
  readonly #base: string;
  constructor(prefix: string, queue: string) {
    this.#base = `${prefix}:${queue}:~`;
  }
  /** A cancel flag (its value: the reason), with a TTL; deleted when the attempt ends. */
  cancelFlag(jobId: string): string {
    return `${this.#base}cancel:${jobId}`;
  }
  /** A worker host's lease (its value: `<build> <slots>`), with a TTL it renews. */
  hostLease(hostId: string): string {
    return `${this.#base}host:${hostId}`;
  }
  /** The pattern of every host lease, for SCAN. */
  hostLeases(): string {
    return `${this.#base}host:*`;
  }
  /** The host id a lease key names. */
  hostOfLease(key: string): string {
    return key.slice(`${this.#base}host:`.length);
  }
  /** An API host's lease, with a TTL it renews. */
  ownerLease(ownerId: string): string {
    return `${this.#base}owner:${ownerId}`;
  }
  /** The channel an API host reads (claims, relayed calls, ends). */
  toOwner(ownerId: string): string {
    return `${this.#base}to-owner:${ownerId}`;
  }
  /** The channel a worker host reads (grants, denials, acknowledgements, cancels). */
  toHost(hostId: string): string {
    return `${this.#base}to-host:${hostId}`;
  }
}
