import type { HostApprovalRequest, HostCheckpoint, HostEvent, HostTaskRequest } from '@troupe/core/internal';
import type { Attempt, AttemptEnd, AttemptHandle } from '../RunTransport.js';
import type { WatchdogKillCause } from '../Watchdog.js';
import type { HostRun } from './HostChannel.js';
import type { ScopeWire } from './ScopeWires.js';
import type { DispatchTicket, ThreadInfo } from './WorkerPool.js';
import type { WorkerEnd } from './workerEnd.js';

/** What the local transport does for one of its attempts (see {@link LocalAttempt}). */
export interface LocalAttemptOwner {
  /** The attempt was handed to `thread` (inside piscina's balancer: must not throw). */
  bind(attempt: LocalAttempt, thread: ThreadInfo): void;
  /** An event batch of the attempt was read. */
  counted(attempt: LocalAttempt): void;
  /** The attempt handed over its result while it still holds work; returns what is wrong with it, if anything. */
  holding(attempt: LocalAttempt, raw: unknown): string | undefined;
}

/**
 * One attempt on the local transport: the transport's own record of it (the
 * thread it was handed to, why the watchdog killed it, the event batches read,
 * the result it handed over early), never the run tree's. It is the attempt's
 * handle for the tree, its ticket for the pool, and what its capability names on
 * its thread's host channel (the host operations the tree serves it, counted).
 */
export class LocalAttempt implements AttemptHandle, DispatchTicket, HostRun {
  readonly spec: Attempt;
  readonly ended: Promise<AttemptEnd>;
  /** The task tuple posted for it (filled in at dispatch). */
  readonly tuple: unknown[];
  /** How its scope crosses. */
  readonly wire: ScopeWire;
  /** The thread it was handed to (none while queued). */
  thread: ThreadInfo | undefined = undefined;
  /** Why the watchdog had its thread killed, if it did. */
  kill: WatchdogKillCause | undefined = undefined;
  /** Event batches read so far. */
  received = 0;
  /** Its result, held until `sent` batches were read (see `SubagentEnd.sent`). */
  expect: { readonly sent: number; readonly resolve: () => void } | undefined = undefined;
  expectTimer: unknown = undefined;
  /** The result it handed over while it held work of the ended run. */
  held: WorkerEnd | undefined = undefined;
  /** It presented its capability on its host channel (late messages may follow its end). */
  talked = false;
  /** Taken back from the queue (`withdraw`). */
  withdrawn = false;
  /** Ended (its `ended` resolved). */
  done = false;
  readonly #owner: LocalAttemptOwner;
  #resolve: (end: AttemptEnd) => void = () => {};

  constructor(spec: Attempt, tuple: unknown[], wire: ScopeWire, owner: LocalAttemptOwner) {
    this.spec = spec;
    this.tuple = tuple;
    this.wire = wire;
    this.#owner = owner;
    this.ended = new Promise<AttemptEnd>((resolve) => {
      this.#resolve = resolve;
    });
  }

  /** Resolve `ended` (once). */
  finish(end: AttemptEnd): void {
    if (this.done) return;
    this.done = true;
    this.#resolve(end);
  }

  get agentId(): string {
    return this.spec.agentId;
  }

  get runId(): string {
    return this.spec.runId;
  }

  onDispatch(thread: ThreadInfo): void {
    this.#owner.bind(this, thread);
  }

  approve(request: HostApprovalRequest): Promise<unknown> {
    return this.spec.host.approve(request);
  }

  task(request: HostTaskRequest): ReturnType<HostRun['task']> {
    return this.spec.host.task(request);
  }

  events(events: readonly HostEvent[]): void {
    this.spec.host.events(events);
    this.#owner.counted(this);
  }

  checkpoint(checkpoint: HostCheckpoint): Promise<unknown> {
    return this.spec.host.checkpoint(checkpoint);
  }

  holding(raw: unknown): string | undefined {
    return this.#owner.holding(this, raw);
  }
}
