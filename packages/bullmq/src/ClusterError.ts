import { TroupeError, type TroupeErrorOptions } from '@troupe/core';

/**
 * The base of the errors `@troupe/bullmq` raises on purpose: a `TroupeError`
 * with a stable `code`. The subclasses below exist where a caller reacts
 * differently; branch on `code` (`isTroupeError(err, 'ERR_VERSION_SKEW')`),
 * which survives a hop between hosts, not on the class.
 *
 * @example
 * ```ts
 * import { isTroupeError } from '@troupe/core'
 * const err = new ClusterError('the relay refused the call', { code: 'ERR_HOST_REFUSED' })
 * isTroupeError(err, 'ERR_HOST_REFUSED') // true
 * ```
 */
export class ClusterError extends TroupeError {
  override readonly name: string = 'ClusterError';
}

/**
 * Redis could not be reached when {@link bullmqTransport}'s `ready()` or
 * {@link startWorkerHost} ran: every connection opened for it was closed again,
 * nothing was started. `url` names the server without its password.
 *
 * @example
 * ```ts
 * import { isTroupeError } from '@troupe/core'
 * try {
 *   await startWorkerHost({ connection: 'redis://127.0.0.1:1', build: 'b1', agents: {} })
 * } catch (err) {
 *   if (isTroupeError(err, 'ERR_REDIS_UNREACHABLE')) console.error(`is Redis running at ${(err as RedisUnreachableError).url}?`)
 * }
 * ```
 */
export class RedisUnreachableError extends ClusterError {
  override readonly name: string = 'RedisUnreachableError';
  /** The server as configured, without its password (`redis://user:***@host:port/db`). */
  readonly url: string;
  constructor(url: string, detail: string, options: TroupeErrorOptions = {}) {
    super(
      `cannot reach Redis at ${url}: ${detail}; start redis-server (Redis 7) there, or pass the connection of one that runs`,
      { ...options, code: 'ERR_REDIS_UNREACHABLE' },
    );
    this.url = url;
  }
  override toData(): Record<string, unknown> {
    return { url: this.url };
  }
}

/**
 * Redis runs with a setting that loses work: refused at start, nothing started.
 * BullMQ keeps jobs, locks and Troupe's cancel flags and leases as keys; an
 * eviction policy other than `noeviction` may drop any of them under memory
 * pressure (a dropped lock runs a job twice, a dropped cancel flag lets a run
 * go on).
 *
 * @example
 * ```ts
 * import { isTroupeError } from '@troupe/core'
 * const isConfig = (err: unknown) => isTroupeError(err, 'ERR_REDIS_CONFIG')
 * ```
 */
export class RedisConfigError extends ClusterError {
  override readonly name: string = 'RedisConfigError';
  constructor(message: string, options: TroupeErrorOptions = {}) {
    super(message, { ...options, code: 'ERR_REDIS_CONFIG' });
  }
}

/**
 * Two hosts of a cluster run different builds (or speak different protocol
 * versions): the work was refused and nothing of it ran. Raised on the worker
 * host (the job ends with this error) and on the API host (the attempt ends
 * `failed` with it). Deploy one build everywhere, or give each build its own
 * `queue`.
 *
 * @example
 * ```ts
 * const skew = new VersionSkewError('job', 'build-2', 'build-1')
 * skew.expected // 'build-2'
 * ```
 */
export class VersionSkewError extends ClusterError {
  override readonly name: string = 'VersionSkewError';
  /** What the other side asked for. */
  readonly expected: string;
  /** What this side runs. */
  readonly actual: string;
  constructor(what: string, expected: string, actual: string, options: TroupeErrorOptions = {}) {
    super(
      `version skew: the ${what} is for build ${JSON.stringify(expected)}, this host runs ${JSON.stringify(actual)}; deploy one build on every host of a queue (or give each build its own queue)`,
      { ...options, code: 'ERR_VERSION_SKEW' },
    );
    this.expected = expected;
    this.actual = actual;
  }
  override toData(): Record<string, unknown> {
    return { expected: this.expected, actual: this.actual };
  }
}

/**
 * The host that ran an attempt vanished — killed, its lease lapsed, its job
 * stalled, its lock lost, or it handed the attempt back while draining: nobody
 * can say how the attempt ended. It is the error of a `lost` end; the run tree
 * runs the run again from its last checkpoint as a new attempt.
 *
 * @example
 * ```ts
 * const lost = new AttemptLostError('run_1.2', 'host-a', 'its lease lapsed')
 * lost.host // 'host-a'
 * ```
 */
export class AttemptLostError extends ClusterError {
  override readonly name: string = 'AttemptLostError';
  /** The job of the attempt (`<runId>.<attempt>`). */
  readonly jobId: string;
  /** The host it ran on (`undefined`: it was never granted). */
  readonly host: string | undefined;
  constructor(jobId: string, host: string | undefined, why: string, options: TroupeErrorOptions = {}) {
    super(`attempt ${jobId} was lost${host === undefined ? '' : ` on host ${host}`}: ${why}`, {
      ...options,
      code: 'ERR_ATTEMPT_LOST',
    });
    this.jobId = jobId;
    this.host = host;
  }
  override toData(): Record<string, unknown> {
    return { jobId: this.jobId, host: this.host };
  }
}
