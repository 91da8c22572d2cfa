import { AsyncResource } from 'node:async_hooks';
import type { CancelReason, ModelDelta } from '@troupe/core';
import { NO_USAGE } from '@troupe/core';
import type { AgentReply } from '../AgentHandle.js';
import type { InterruptedMessage } from './Conversation.js';
import type { RunNode } from './RunNode.js';

/** A message waiting for (or running in) a parent agent. */
export interface Job {
  readonly input: string;
  readonly signal: AbortSignal | undefined;
  /** Set by `stream`: the message's deltas. */
  readonly onDeltas: ((node: RunNode, deltas: readonly ModelDelta[]) => void) | undefined;
  readonly resolve: (reply: AgentReply) => void;
  readonly reject: (error: Error) => void;
  /** Removes the job's abort listener (set once it has one). */
  detach: (() => void) | undefined;
  /** Set for `resume()`: the interrupted message it finishes. */
  readonly resume: InterruptedMessage | undefined;
  /** A job that waited in the mailbox starts in the async context of its `send` (a host's trace, its logger's request id). */
  context: ((start: () => RunNode) => RunNode) | undefined;
  /** Whether it may wait on a person: sent with `{ whileSuspended: 'queue' }`. */
  readonly queue: boolean;
}

/** A job made for a message (or a resume), settling `resolve`/`reject`. */
export function newJob(
  input: string,
  signal: AbortSignal | undefined,
  onDeltas: Job['onDeltas'],
  resume: InterruptedMessage | undefined,
  resolve: Job['resolve'],
  reject: Job['reject'],
  queue = false,
): Job {
  return { input, signal, onDeltas, resolve, reject, detach: undefined, resume, context: undefined, queue };
}

/** The reply of a job that never ran (aborted while it waited, or dropped at shutdown). */
function cancelled(reason: CancelReason): AgentReply {
  return { status: 'cancelled', reason, usage: NO_USAGE, totalUsage: NO_USAGE };
}

/** What a mailbox tells its agent when the signal of one of its messages aborts. */
export interface MailboxOwner {
  /** A resume aborted while it waited: its message is interrupted again. */
  restoreInterrupted(message: InterruptedMessage): void;
  /** The signal of `job` aborted after it was taken out to run. */
  aborted(job: Job): void;
}

/**
 * A parent agent's bounded mailbox: the messages waiting to run, oldest
 * first (a resume goes first). Aborting a waiting message's signal takes it
 * out and answers it `cancelled`; aborting a running one is its owner's to
 * act on ({@link MailboxOwner.aborted}).
 */
export class Mailbox {
  readonly #jobs: Job[] = [];
  readonly capacity: number;

  constructor(capacity: number) {
    this.capacity = capacity;
  }

  get size(): number {
    return this.#jobs.length;
  }

  /** Whether one more message would be past the bound. */
  get full(): boolean {
    return this.#jobs.length >= this.capacity;
  }

  /**
   * Queue `job` for `owner`: a resume (`first`) ahead of every waiting message, a message after
   * them. A message that waits (behind others, or for its `busy` owner) starts in the async context
   * of its send. Aborting its signal drops it from the mailbox (answered cancelled; a resume is
   * given back to the owner as interrupted), or, once it was taken out to run, tells the owner.
   */
  queue(job: Job, first: boolean, owner: MailboxOwner, busy: boolean): void {
    const signal = job.signal;
    if (signal !== undefined) {
      // The owner is held by the job's abort listener, not by the mailbox (72 B: no private method either).
      const onAbort = (): void => {
        const index = this.#jobs.indexOf(job);
        if (index >= 0) {
          this.#jobs.splice(index, 1);
          job.detach?.();
          if (job.resume !== undefined) owner.restoreInterrupted(job.resume);
          job.resolve(cancelled('user'));
        } else owner.aborted(job);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      job.detach = () => signal.removeEventListener('abort', onAbort);
    }
    if (first) this.#jobs.unshift(job);
    else {
      if (busy || this.#jobs.length > 0) job.context = AsyncResource.bind((start) => start());
      this.#jobs.push(job);
    }
  }

  shift(): Job | undefined {
    const job = this.#jobs.shift();
    // Emptied by shift, the array keeps its slots (152 B) for as long as the agent idles: let them go.
    if (job === undefined) this.#jobs.length = 0;
    return job;
  }

  /** Every waiting message is answered `cancelled` (shutdown). */
  dropAll(): void {
    for (const job of this.#jobs.splice(0)) {
      job.detach?.();
      job.resolve(cancelled('shutdown'));
    }
  }

  /** Counts: the waiting messages that may wait on a person, and those that may not. */
  waiting(): { readonly queued: number; readonly refused: number } {
    let queued = 0;
    for (const job of this.#jobs) if (job.queue || job.resume !== undefined) queued++;
    return { queued, refused: this.#jobs.length - queued };
  }

  /**
   * Every waiting message that may not wait on a person (sent without `{ whileSuspended: 'queue' }`)
   * is rejected with the error `make` builds (made only when one is); how many were.
   */
  rejectUnqueued(make: () => Error): number {
    const kept: Job[] = [];
    const refused: Job[] = [];
    for (const job of this.#jobs) (job.queue || job.resume !== undefined ? kept : refused).push(job);
    if (refused.length === 0) return 0;
    this.#jobs.splice(0, this.#jobs.length, ...kept);
    const error = make();
    for (const job of refused) {
      job.detach?.();
      job.reject(error);
    }
    return refused.length;
  }

  /** Every waiting message is rejected with the error `make` builds (made only when one waits). */
  rejectAll(make: () => Error): void {
    const jobs = this.#jobs.splice(0);
    if (jobs.length === 0) return;
    const error = make();
    for (const job of jobs) {
      job.detach?.();
      job.reject(error);
    }
  }
}
