import {
  type CancelReason,
  ClosedError,
  InvalidArgumentError,
  NO_USAGE,
  type TimerHandle,
  TroupeError,
  WorkerCrashedError,
} from '@troupe/core';
import { encodeError, HostFeature, HostOp } from '@troupe/core/internal';
import type {
  Attempt,
  AttemptEnd,
  AttemptHandle,
  RunEnd,
  RunTransport,
  TransportHost,
  TransportStats,
} from '@troupe/supervisor';
import {
  HostChannel,
  type HostLookup,
  type HostRefusal,
  type HostRun,
  mintCapability,
} from '@troupe/supervisor/internal';
import { Queue, QueueEvents } from 'bullmq';
import type { Redis } from 'ioredis';
import {
  type BullmqTransportOptions,
  type ResolvedBullmqTransportOptions,
  resolveBullmqTransportOptions,
} from './BullmqTransportOptions.js';
import { AttemptLostError, VersionSkewError } from './ClusterError.js';
import { JOB_VERSION, type JobData, jobIdOf } from './internal/JobData.js';
import { mintId } from './internal/mintId.js';
import { type HostSeen, type OwnedAttempt, type RelayPeer, safeTenant, sameSecret } from './internal/OwnedAttempt.js';
import { probeRedis, redisClient } from './internal/openRedis.js';
import { RedisNames } from './internal/RedisNames.js';
import {
  admit,
  type RelayedAttempt,
  refusal,
  relayedAttempt,
  type Served,
  serve,
  weight,
} from './internal/RelayServer.js';
import { decodeRefusal, decodeToOwner, encodeWire, type Grant, type RelayKind, type ToHost } from './internal/Wire.js';

/** The host operation each relayed call is, on the host channel. */
const OP = {
  approve: HostOp.approve,
  task: HostOp.task,
  events: HostOp.events,
  checkpoint: HostOp.checkpoint,
} as const;

/** How many ended attempts' hosts are remembered (to answer their late messages). */
const ENDED_KEPT = 4096;

/** How many times one attempt is queued at most (it runs again only while none of its tools started). */
const MAX_LEGS = 3;

/** What a checkpoint the transport answers itself resolves with (nothing is saved). */
const CHECKPOINT_SAVED: Promise<unknown> = Promise.resolve(true);

/**
 * A `RunTransport` that runs attempts on worker hosts through BullMQ on Redis 7
 * (see `startWorkerHost`). Pass it to `createSupervisor({ transport })`: the
 * supervisor of this process (the API host) keeps the run tree, its parent
 * agents, approval and the store; each subagent attempt becomes a BullMQ job
 * (`<runId>.<attempt>`, BullMQ's retries off: the tree owns retries) that
 * names the run, the agent's logical id and the build — never the scope,
 * toolContext or capability. A worker host that takes the job claims the
 * attempt over Redis pub/sub and is granted those, once, while the attempt is
 * current, not cancelled and of its build.
 *
 * What the attempt asks of its supervisor (approval, nested tasks, events,
 * checkpoints) is relayed here and served by the tree with the same checks
 * and limits as a thread's, each message once (by capability and sequence)
 * and in order. Cancel sets a durable flag and tells the host; an attempt
 * whose end does not come within the grace and the relay slack ends
 * `cancelled`, forced, and is fenced. An attempt whose host vanishes (lease
 * lapsed, job stalled, lock lost, drained) before any of its tools started is
 * queued again for any host (without the tree's checkpoints, its worker checks
 * in here before each tool call); after, it ends `lost`: the tree runs it
 * again from its last checkpoint, or ends it `crashed` when it has none.
 *
 * Gotchas: `ready()` throws `ERR_REDIS_UNREACHABLE` or `ERR_REDIS_CONFIG`
 * (eviction on) with nothing left started; `close()` lets attempts end within
 * its budget, then ends the rest `cancelled`, forced.
 *
 * @example
 * ```ts
 * const transport = bullmqTransport({ connection: 'redis://127.0.0.1:6379', build: '2026.12.1' })
 * await transport.ready()
 * transport.stats().slots // what the live worker hosts offer
 * await transport.close({ drainMs: 1000 })
 * ```
 */
export function bullmqTransport(options: BullmqTransportOptions): BullmqTransport {
  return new BullmqTransport(options);
}

/**
 * The transport {@link bullmqTransport} makes (see there): a `RunTransport`
 * whose `options` are its resolved options.
 *
 * @example
 * ```ts
 * const transport: BullmqTransport = bullmqTransport({ connection: 'redis://127.0.0.1:6379', build: 'b1' })
 * transport.options.ownerId // this API host's id in jobs and channels
 * ```
 */
export class BullmqTransport implements RunTransport {
  readonly name = 'bullmq';
  /** The grace a cancelled attempt has on its worker host before it is killed there (ms). */
  readonly graceMs: number;
  /** The options, validated and defaulted. */
  readonly options: ResolvedBullmqTransportOptions;
  readonly #names: RedisNames;
  #host: TransportHost | undefined;
  /** The supervisor's host channel: relayed calls are served by the same code as a thread's. */
  #channel: HostChannel<RelayPeer> | undefined;
  #peers = 0;
  #ready: Promise<void> | undefined;
  #cmd: Redis | undefined;
  #sub: Redis | undefined;
  #queue: Queue | undefined;
  /**
   * The connection of the bulk work — the Queue's (a script per dispatch) and the lease checks'
   * (scans) —, of its own: none of it sits in front of a cancel, grant or acknowledgement on `#cmd`.
   */
  #queueConnection: Redis | undefined;
  /** When the hosts' leases were last scanned (their slots; at most once a second). */
  #scannedAt = 0;
  #events: QueueEvents | undefined;
  /** The connection QueueEvents was given (BullMQ closes only the ones it makes). */
  #eventsConnection: Redis | undefined;
  #tick: TimerHandle | undefined;
  #closing = false;
  #closed = false;
  readonly #byJob = new Map<string, OwnedAttempt>();
  readonly #byHandle = new WeakMap<AttemptHandle, OwnedAttempt>();
  readonly #byCapability = new Map<string, OwnedAttempt>();
  /** Attempts per tenant in Redis, and those held for the tenant's cap, in order. */
  readonly #tenantLive = new Map<string, number>();
  readonly #tenantHeld = new Map<string, OwnedAttempt[]>();
  /** Relayed weight per host in the current second, and violations per host. */
  readonly #flood = new Map<string, { start: number; count: number }>();
  readonly #violations = new Map<string, number>();
  #hosts = new Map<string, HostSeen>();
  /** The hosts of attempts that ended lately, to refuse their late messages by reply (insertion order). */
  readonly #endedOn = new Map<string, string>();
  #completed = 0;
  #refusedCount = 0;
  #lost = 0;
  /** Attempts queued again by this transport (lost before any tool of them started). */
  #requeued = 0;
  /**
   * This transport's incarnation, in its lease and every grant: a worker host stops the attempts
   * of an owner whose lease names another (an API host restarted under the same `ownerId`).
   */
  readonly #incarnation = mintId(16);
  #drained: (() => void) | undefined;

  constructor(options: BullmqTransportOptions) {
    this.options = resolveBullmqTransportOptions(options);
    this.graceMs = this.options.graceMs;
    this.#names = new RedisNames(this.options.prefix, this.options.queue);
  }

  /**
   * Attempts the live worker hosts of this build can run at once (their leases, read at
   * every lease check; 0 until one is up). A tree defers nested tasks rather than hold them.
   */
  get slots(): number {
    let slots = 0;
    for (const h of this.#hosts.values()) if (h.build === this.options.build) slots += h.slots;
    return slots;
  }

  start(host: TransportHost): void {
    if (this.#host !== undefined)
      throw new InvalidArgumentError('bullmqTransport: started twice (one supervisor owns a transport)');
    this.#host = host;
    this.#channel = new HostChannel<RelayPeer>({
      clock: host.clock,
      lookup: (capability, peer) => this.#lookup(capability, peer),
      recycle: (peer, reason) => {
        peer.recycled = reason;
        this.#violation(peer.host, peer.attempt, reason, true, false);
      },
      refused: (refusal) => this.#refused(refusal),
      floodLimit: this.options.floodLimit,
    });
  }

  // Which run a relayed call is for: the attempt of the peer it came through, while that peer is
  // its current leg's (the relay checked the capability before it handed the call to the channel).
  #lookup(_capability: string, peer: RelayPeer): HostLookup {
    const a = peer.attempt;
    if (a.phase === 'granted' && a.peer === peer && a.found !== undefined) return a.found;
    if (a.phase === 'ended' || a.peer !== peer) {
      return { kind: 'stale', agentId: a.attempt.agentId, runId: a.attempt.runId, quiet: true };
    }
    return { kind: 'unknown' };
  }

  // The host channel's view of a granted leg, made once per grant (the channel keeps what a run
  // asked by this object). A checkpoint goes to the tree when the tree asked for them; otherwise
  // it is this transport's gate: answered here, it means a tool of the attempt may start now.
  #found(a: OwnedAttempt): HostLookup {
    const ops = a.attempt.host;
    const checkpoint: HostRun['checkpoint'] =
      a.gate === 'tree'
        ? (c) => ops.checkpoint(c)
        : () => {
            a.gate = 'closed';
            return CHECKPOINT_SAVED;
          };
    return {
      kind: 'run',
      run: {
        agentId: ops.agentId,
        runId: ops.runId,
        approve: (r) => ops.approve(r),
        task: (r) => ops.task(r),
        events: (e) => ops.events(e),
        checkpoint,
        // Work a run left behind is held by the worker host's own transport, never relayed.
        holding: () => 'held work is kept on the worker host',
      },
    };
  }

  ready(): Promise<void> {
    this.#ready ??= this.#open();
    return this.#ready;
  }

  async #open(): Promise<void> {
    if (this.#host === undefined) throw new InvalidArgumentError('bullmqTransport: ready() before start(host)');
    const o = this.options;
    await probeRedis(o.connection, o.connectionName, o.connectTimeoutMs);
    if (this.#closed) throw new ClosedError('bullmqTransport: closed while starting');
    try {
      this.#cmd = redisClient(o.connection, `troupe-owner-${o.ownerId}`);
      this.#sub = redisClient(o.connection, `troupe-owner-${o.ownerId}-sub`);
      // Reconnection errors are retried by ioredis; listeners keep them from being printed as unhandled.
      this.#cmd.on('error', () => {});
      this.#sub.on('error', () => {});
      await Promise.all([this.#cmd.connect(), this.#sub.connect()]);
      this.#sub.on('messageBuffer', (_channel: Buffer, message: Buffer) => this.#onMessage(message));
      await this.#sub.subscribe(this.#names.toOwner(o.ownerId));
      await this.#cmd.set(this.#names.ownerLease(o.ownerId), this.#leaseValue(), 'PX', o.ownerLeaseMs);
      this.#queueConnection = redisClient(o.connection, `troupe-owner-${o.ownerId}-queue`);
      this.#queueConnection.on('error', () => {});
      this.#queue = new Queue(o.queue, { connection: this.#queueConnection, prefix: o.prefix });
      this.#queue.on('error', () => {});
      this.#eventsConnection = redisClient(o.connection, `troupe-owner-${o.ownerId}-events`);
      this.#eventsConnection.on('error', () => {});
      this.#events = new QueueEvents(o.queue, {
        connection: this.#eventsConnection,
        prefix: o.prefix,
      });
      this.#events.on('error', () => {});
      this.#events.on('failed', ({ jobId, failedReason }) => this.#onJobFailed(jobId, failedReason));
      this.#events.on('completed', ({ jobId }) => this.#onJobCompleted(jobId));
      await Promise.all([this.#queue.waitUntilReady(), this.#events.waitUntilReady()]);
      await this.#scanHosts();
      this.#schedule();
    } catch (error) {
      await this.#teardown(true);
      throw error;
    }
  }

  dispatch(attempt: Attempt): AttemptHandle {
    let resolve: (end: AttemptEnd) => void = () => {};
    const ended = new Promise<AttemptEnd>((r) => {
      resolve = r;
    });
    const handle: AttemptHandle = { ended };
    const jobId = jobIdOf(attempt.runId, attempt.attempt);
    const o = this.options;
    const a: OwnedAttempt = {
      attempt,
      jobId,
      nonce: mintId(22),
      capability: attempt.capability,
      legs: 1,
      bounces: 0,
      gate: (attempt.features & HostFeature.durable) !== 0 ? 'tree' : 'open',
      found: undefined,
      tenant: o.tenantOf === undefined ? undefined : safeTenant(o.tenantOf, attempt),
      handle,
      resolve,
      since: this.#now(),
      phase: 'held',
      hostId: undefined,
      relay: undefined,
      peer: undefined,
      cancelled: undefined,
      placed: false,
      backstop: undefined,
    };
    this.#byHandle.set(handle, a);
    if (this.#closing || this.#closed) {
      this.#finish(a, { status: 'cancelled', reason: 'shutdown', forced: false });
      return handle;
    }
    if (this.#byJob.has(jobId)) {
      // The tree dispatches an attempt once: a second dispatch of one (run, attempt) is a defect.
      this.#finish(a, {
        status: 'failed',
        error: new TroupeError(`attempt ${jobId} was dispatched twice`, { code: 'ERR_INTERNAL' }),
        events: [],
        turns: 0,
      });
      return handle;
    }
    this.#byJob.set(jobId, a);
    this.#byCapability.set(a.capability, a);
    if (a.tenant !== undefined && o.maxInFlightPerTenant !== undefined) {
      const live = this.#tenantLive.get(a.tenant) ?? 0;
      if (live >= o.maxInFlightPerTenant) {
        const held = this.#tenantHeld.get(a.tenant) ?? [];
        held.push(a);
        this.#tenantHeld.set(a.tenant, held);
        return handle;
      }
    }
    this.#enqueue(a);
    return handle;
  }

  #enqueue(a: OwnedAttempt): void {
    a.phase = 'queued';
    if (a.tenant !== undefined) this.#tenantLive.set(a.tenant, (this.#tenantLive.get(a.tenant) ?? 0) + 1);
    void this.#addJob(a);
  }

  async #addJob(a: OwnedAttempt, delay = 0): Promise<void> {
    const o = this.options;
    const data: JobData = {
      v: JOB_VERSION,
      runId: a.attempt.runId,
      attempt: a.attempt.attempt,
      owner: o.ownerId,
      nonce: a.nonce,
      agent: o.agentIdOf(a.attempt.agent),
      build: o.build,
    };
    // A trace context is no secret: it rides in the job when the tree has one.
    const traceparent = (a.attempt as { readonly traceparent?: string }).traceparent;
    if (typeof traceparent === 'string' && traceparent.length <= 128) data.traceparent = traceparent;
    try {
      await this.ready();
      if (a.phase !== 'queued') return;
      await (this.#queue as Queue).add('run', data, {
        jobId: a.jobId,
        attempts: 1,
        removeOnComplete: true,
        removeOnFail: true,
        ...(delay > 0 ? { delay } : {}),
      });
    } catch (error) {
      // Redis refused the job (or never started): the attempt cannot run; nothing ran.
      if (a.phase === 'queued') {
        this.#finish(a, {
          status: 'crashed',
          error: new WorkerCrashedError(`could not queue attempt ${a.jobId}: ${(error as Error).message}`, null, {
            cause: error,
          }),
          exitCode: null,
        });
      }
    }
  }

  withdraw(handle: AttemptHandle): boolean {
    const a = this.#byHandle.get(handle);
    if (a === undefined || (a.phase !== 'held' && a.phase !== 'queued')) return false;
    const queued = a.phase === 'queued';
    this.#finish(a, { status: 'cancelled', reason: a.cancelled ?? 'user', forced: false });
    // A host that took the job meanwhile is denied its claim: the attempt is no longer current.
    if (queued) void this.#queue?.remove(a.jobId).catch(() => {});
    return true;
  }

  cancel(handle: AttemptHandle, reason: CancelReason): void {
    const a = this.#byHandle.get(handle);
    if (a === undefined || a.phase === 'ended' || a.cancelled !== undefined) return;
    a.cancelled = reason;
    if (a.phase !== 'granted') {
      // Nothing runs it yet: it ends now, and a later claim is denied.
      this.withdraw(handle);
      return;
    }
    const o = this.options;
    // The message first: it is what the host acts on now (the flag is for a host that reconnects).
    this.#toHost(a, ['cancel', a.jobId, reason]);
    void this.#cmd?.set(this.#names.cancelFlag(a.jobId), reason, 'PX', o.cancelFlagTtlMs).catch(() => {});
    // The backstop: no end within the grace (the host kills it then) and the relay slack.
    a.backstop = this.#clock().setTimeout(() => {
      a.backstop = undefined;
      this.kill(handle, reason);
    }, o.graceMs + o.relaySlackMs);
  }

  kill(handle: AttemptHandle, reason: CancelReason): void {
    const a = this.#byHandle.get(handle);
    if (a === undefined || a.phase === 'ended') return;
    if (a.phase !== 'granted') {
      a.cancelled ??= reason;
      this.withdraw(handle);
      return;
    }
    this.#toHost(a, ['kill', a.jobId, reason]);
    void this.#cmd?.set(this.#names.cancelFlag(a.jobId), reason, 'PX', this.options.cancelFlagTtlMs).catch(() => {});
    this.#finish(a, { status: 'cancelled', reason, forced: true });
  }

  canQueue(): boolean {
    return !this.#closing && this.#byJob.size < this.options.maxInFlight;
  }

  stats(): TransportStats {
    let queued = 0;
    let running = 0;
    for (const a of this.#byJob.values()) {
      if (a.phase === 'granted') running++;
      else queued++;
    }
    return {
      slots: this.slots,
      queued,
      running,
      completed: this.#completed,
      refused: this.#refusedCount,
      hosts: this.#hosts.size,
      lost: this.#lost,
      requeued: this.#requeued,
    };
  }

  async close(options: { readonly drainMs: number }): Promise<void> {
    if (this.#closed) return;
    this.#closing = true;
    if (this.#byJob.size > 0) {
      const drained = new Promise<void>((resolve) => {
        this.#drained = resolve;
      });
      let timer: TimerHandle | undefined;
      const budget = new Promise<void>((resolve) => {
        timer = this.#clock().setTimeout(resolve, options.drainMs);
      });
      await Promise.race([drained, budget]);
      this.#clock().clearTimeout(timer);
      for (const a of [...this.#byJob.values()]) this.kill(a.handle, 'shutdown');
    }
    await this.#teardown(false);
  }

  async destroy(): Promise<void> {
    if (this.#closed) return;
    this.#closing = true;
    for (const a of [...this.#byJob.values()]) this.kill(a.handle, 'shutdown');
    await this.#teardown(true);
  }

  /** `await using transport = bullmqTransport(...)` closes it with a 5 s drain. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close({ drainMs: 5_000 });
  }

  async #teardown(now: boolean): Promise<void> {
    this.#closed = true;
    this.#closing = true;
    if (this.#tick !== undefined) this.#clock().clearTimeout(this.#tick);
    this.#tick = undefined;
    const cmd = this.#cmd;
    const sub = this.#sub;
    const queue = this.#queue;
    const events = this.#events;
    const eventsConnection = this.#eventsConnection;
    const queueConnection = this.#queueConnection;
    this.#cmd = this.#sub = this.#queue = this.#events = this.#eventsConnection = this.#queueConnection = undefined;
    if (!now && cmd !== undefined) await cmd.del(this.#names.ownerLease(this.options.ownerId)).catch(() => {});
    await Promise.allSettled([queue?.close(), events?.close()]);
    for (const client of [sub, cmd, eventsConnection, queueConnection]) {
      if (client === undefined) continue;
      if (now) client.disconnect();
      else await client.quit().catch(() => client.disconnect());
    }
  }

  // ---- messages from worker hosts

  #onMessage(bytes: Buffer): void {
    const message = decodeToOwner(bytes, this.options.maxRelayBytes);
    if (typeof message === 'string') {
      this.#refuse(undefined, message, false);
      return;
    }
    switch (message[0]) {
      case 'claim':
        this.#onClaim(message[2], message[3], message[4], message[5]);
        return;
      case 'refuse':
        this.#onRefuse(message[2], message[3], message[5]);
        return;
      case 'relay':
        this.#onRelay(message[1], message[2], message[3], message[4], message[5]);
        return;
      default:
        message satisfies never;
    }
  }

  #onClaim(jobId: string, nonce: string, hostId: string, build: string): void {
    const a = this.#byJob.get(jobId);
    const deny = (why: string, error?: Error): void => {
      const shape = encodeError(
        error ?? new TroupeError(`claim of ${jobId} denied: ${why}`, { code: 'ERR_HOST_REFUSED' }),
      );
      this.#publish(this.#names.toHost(hostId), ['deny', jobId, nonce, shape]);
    };
    if (a === undefined) {
      deny('the attempt is not current (it ended, was superseded, or is not this API host’s)');
      return;
    }
    if (!sameSecret(nonce, a.nonce)) {
      // A claim that did not read the job (forged, or replayed from an older one).
      this.#violation(hostId, a, `a claim of ${jobId} with a nonce that is not its job's`, false);
      deny('the nonce is not the job’s');
      return;
    }
    if (a.phase === 'granted') {
      // The same host asking again (its claim or our grant was lost) gets the same grant; any other is denied.
      if (a.hostId === hostId) this.#sendGrant(a);
      else deny(`already granted to another host`);
      return;
    }
    if (a.phase !== 'queued') {
      deny('the attempt is not queued');
      return;
    }
    if (build !== this.options.build) {
      const skew = new VersionSkewError('attempt', this.options.build, build);
      deny('version skew', skew);
      this.#finish(a, { status: 'failed', error: skew, events: [], turns: 0 });
      return;
    }
    if ((this.#violations.get(hostId) ?? 0) >= this.options.maxViolations) {
      deny(`host ${hostId} broke the protocol ${this.options.maxViolations} times: it is granted no more work`);
      return;
    }
    a.phase = 'granted';
    a.hostId = hostId;
    a.relay = relayedAttempt(jobId, a.capability, a.attempt.host, hostId);
    a.peer = { id: ++this.#peers, host: hostId, recycled: undefined, floodCount: 0, floodStart: 0, attempt: a };
    a.found = this.#found(a);
    // (Its deadline is the tree's to enforce: a cancel, whose backstop is in cancel().)
    this.#sendGrant(a);
  }

  #sendGrant(a: OwnedAttempt): void {
    const t = a.attempt;
    const grant: Grant = {
      capability: a.capability,
      agentId: t.agentId,
      parentAgentId: t.parentAgentId,
      scope: t.scope,
      toolContext: t.toolContext,
      work: t.work,
      // The time it has left: its queue wait counts (the tree's clock and the host's need not agree).
      timeoutMs: t.timeoutMs === undefined ? undefined : Math.max(0, t.timeoutMs - (this.#now() - a.since)),
      // Without the tree's checkpoints, the worker still asks before each tool call: answered here,
      // it tells this transport whether the attempt may run again elsewhere should its host vanish.
      features: a.gate === 'tree' ? t.features : t.features | HostFeature.durable,
      cancelled: t.cancelled,
      incarnation: this.#incarnation,
    };
    this.#toHost(a, ['grant', a.jobId, a.nonce, grant]);
  }

  #onRefuse(jobId: string, nonce: string, shape: unknown): void {
    const a = this.#byJob.get(jobId);
    if (a === undefined || a.phase !== 'queued' || !sameSecret(nonce, a.nonce)) return;
    const error = decodeRefusal(shape);
    this.#finish(a, { status: 'failed', error, events: [], turns: 0 });
  }

  #onRelay(jobId: string, capability: string, rseq: number, kind: RelayKind, payload: unknown): void {
    const a = this.#byJob.get(jobId);
    const other = this.#byCapability.get(capability);
    if (a === undefined || a.relay === undefined) {
      if (other !== undefined && other.jobId !== jobId) {
        // A real capability presented for another job: its holder is fenced.
        this.#violation(other.hostId, other, `its capability was presented for ${jobId}`, true);
        return;
      }
      // A late message of an attempt that ended (superseded, fenced): refused, it acts on nothing.
      this.#refuse(undefined, `a message of ${jobId}, which is not running`, false);
      this.#ackTo(undefined, jobId, rseq, 0, refusal(`attempt ${jobId} is not running here`));
      return;
    }
    if (!sameSecret(capability, a.relay.capability)) {
      if (other !== undefined) this.#violation(other.hostId, other, `its capability was presented for ${jobId}`, true);
      else this.#refuse(a, `a capability this API host did not grant for ${jobId}`, false);
      // Not answered: an acknowledgement goes to the host the job was granted to, whose own message
      // of that sequence number it would settle (whoever forged this one does not read it).
      return;
    }
    const hostId = a.relay.hostId;
    if (this.#charge(hostId, weight(kind, payload))) {
      this.#violation(
        hostId,
        a,
        `a flood: over ${this.options.floodLimit} messages, events and deltas within a second`,
        true,
      );
      return;
    }
    const ready = admit(a.relay, rseq, kind, payload);
    if (ready === 'overflow') {
      this.#violation(hostId, a, 'over 1024 relayed messages ahead of a missing one', true);
      return;
    }
    if (ready === 'duplicate') {
      const reply = a.relay.replies.get(rseq);
      if (reply !== undefined) this.#ack(a, rseq, reply[0], reply[1]);
      return;
    }
    for (const [seq, k, p] of ready) {
      if (a.phase !== 'granted') return;
      if (k === 'approve' || k === 'task' || k === 'events' || k === 'checkpoint') this.#call(a, seq, k, p);
      else this.#served(a, seq, serve(a.relay, k, p));
    }
  }

  // A relayed host call, served by the host channel as a thread's call is: as the wire tuple a
  // thread posts (`seq` its relayed sequence number; 0 for the notice of events), its reply acked.
  #call(a: OwnedAttempt, seq: number, kind: keyof typeof OP, payload: unknown): void {
    const channel = this.#channel as HostChannel<RelayPeer>;
    const peer = a.peer as RelayPeer;
    // The leg this call came from: a reply that comes after the attempt moved to another host is
    // that leg's, and goes nowhere (its sequence numbers are not the new leg's).
    const relay = a.relay as RelayedAttempt;
    const notice = kind === 'events';
    channel.receive(peer, [OP[kind], notice ? 0 : seq, a.capability, payload], (message) => {
      const ok = message[1] === 1 ? 1 : 0;
      relay.replies.set(seq, [ok, message[2]]);
      this.#ackTo(relay.hostId, relay.jobId, seq, ok, message[2]);
    });
    if (!notice) return;
    // A notice has no reply of its own: acknowledged once served (or refused, when it fenced the attempt).
    const reply: readonly [0 | 1, unknown] =
      a.phase === 'granted' && a.relay === relay ? [1, undefined] : [0, refusal('the event batch was refused')];
    relay.replies.set(seq, reply);
    this.#ackTo(relay.hostId, relay.jobId, seq, reply[0], reply[1]);
  }

  #served(a: OwnedAttempt, seq: number, served: Served): void {
    switch (served.kind) {
      case 'placed':
        a.relay?.replies.set(seq, [1, undefined]);
        this.#ack(a, seq, 1, undefined);
        if (!a.placed) {
          a.placed = true;
          a.attempt.placed?.({ threadId: served.threadId, host: a.hostId, at: this.#now() });
        }
        return;
      case 'end':
        this.#ack(a, seq, 1, undefined);
        this.#finish(a, served.end.end, served.end.usage);
        return;
      case 'handback':
        this.#ack(a, seq, 1, undefined);
        this.#lose(a, `its host handed it back (${served.reason})`);
        return;
      case 'violation':
        this.#ackTo(a.hostId, a.jobId, seq, 0, refusal(served.reason));
        this.#violation(a.hostId, a, served.reason, true);
        return;
      default:
        served satisfies never;
    }
  }

  // A relayed message that breaks the protocol: refused, counted against its host, and (`fence`)
  // the attempt it names ends `crashed` and is stopped on its host.
  #violation(hostId: string | undefined, a: OwnedAttempt, reason: string, fence: boolean, report = true): void {
    if (hostId !== undefined) this.#violations.set(hostId, (this.#violations.get(hostId) ?? 0) + 1);
    if (report) this.#refuse(a, reason, fence);
    if (!fence || a.phase === 'ended') return;
    if (a.phase === 'granted') this.#toHost(a, ['kill', a.jobId, 'shutdown']);
    this.#finish(a, {
      status: 'crashed',
      error: new WorkerCrashedError(
        `worker host ${hostId ?? '(unknown)'} broke the relay protocol for attempt ${a.jobId}: ${reason}; the attempt was fenced`,
        null,
      ),
      exitCode: null,
    });
  }

  #refuse(a: OwnedAttempt | undefined, reason: string, fenced: boolean): void {
    this.#refused({
      threadId: 0,
      host: a?.hostId,
      reason,
      op: undefined,
      agentId: a?.attempt.agentId,
      runId: a?.attempt.runId,
      recycled: fenced,
      at: this.#now(),
    });
  }

  #refused(refusal: HostRefusal): void {
    this.#refusedCount++;
    const host = this.#host;
    if (host === undefined || !host.listening('host.refused')) return;
    host.emit('host.refused', refusal);
  }

  #charge(hostId: string, n: number): boolean {
    const now = this.#now();
    let f = this.#flood.get(hostId);
    if (f === undefined || now - f.start > 1000) {
      f = { start: now, count: 0 };
      this.#flood.set(hostId, f);
    }
    f.count += n;
    return f.count > this.options.floodLimit;
  }

  // ---- loss

  #onJobFailed(jobId: string, reason: string): void {
    const a = this.#byJob.get(jobId);
    if (a === undefined) return;
    if (a.phase === 'granted') this.#lose(a, `its job failed in BullMQ (${reason})`);
    else if (a.phase === 'queued') {
      // Its job ended before any grant (its claim denied or given up): nothing ran; queue it again,
      // a little later each time, so that a host that is denied every claim (one granted no more
      // work) does not spin through it while the hosts that may run it are busy.
      a.bounces++;
      void this.#addJob(a, a.bounces < 2 ? 0 : Math.min(1000, 5 * 2 ** a.bounces));
    }
  }

  // A host completes an attempt's job once its end was acknowledged: an end that never came (lost
  // on the way, refused) leaves the attempt waiting on nothing. Past the relay slack it is lost.
  #onJobCompleted(jobId: string): void {
    const a = this.#byJob.get(jobId);
    if (a === undefined || a.phase !== 'granted') return;
    this.#clock().setTimeout(() => {
      if (a.phase === 'granted') this.#lose(a, 'its job completed without an end reaching this API host');
    }, this.options.relaySlackMs);
  }

  #lose(a: OwnedAttempt, why: string): void {
    if (a.phase === 'ended') return;
    // Cancelled already: nobody runs it again; it ends as a cancel that had to be forced.
    if (a.cancelled !== undefined) {
      this.#finish(a, { status: 'cancelled', reason: a.cancelled, forced: true });
      return;
    }
    // No tool of it started (this transport answers its worker's ask before each one): nothing of
    // it happened but model calls, so it is queued again, for any host, as the same attempt.
    if (a.gate === 'open' && a.phase === 'granted' && a.legs < MAX_LEGS && !this.#closing) {
      this.#again(a);
      return;
    }
    this.#lost++;
    this.#finish(a, { status: 'lost', error: new AttemptLostError(a.jobId, a.hostId, why) });
  }

  // Queue a granted attempt again under a new job, nonce and capability: the host it was granted
  // to is told to stop it (should it be alive), and whatever that leg still sends is refused.
  #again(a: OwnedAttempt): void {
    const old = a.jobId;
    if (a.hostId !== undefined) {
      this.#toHost(a, ['kill', old, 'shutdown']);
      this.#remember(old, a.hostId);
    }
    if (a.peer !== undefined) a.peer.recycled = 'its attempt was queued again';
    this.#byJob.delete(old);
    if (this.#byCapability.get(a.capability) === a) this.#byCapability.delete(a.capability);
    a.legs++;
    a.jobId = jobIdOf(a.attempt.runId, a.attempt.attempt, a.legs);
    a.nonce = mintId(22);
    a.capability = mintCapability();
    a.phase = 'queued';
    a.hostId = undefined;
    a.relay = undefined;
    a.peer = undefined;
    a.found = undefined;
    a.placed = false;
    this.#byJob.set(a.jobId, a);
    this.#byCapability.set(a.capability, a);
    this.#requeued++;
    void this.#addJob(a);
  }

  #schedule(): void {
    if (this.#closed) return;
    this.#tick = this.#clock().setTimeout(() => {
      this.#tick = undefined;
      void this.#check().finally(() => this.#schedule());
    }, this.options.leaseCheckMs);
  }

  // Renew this API host's lease; end `lost` the attempts of hosts whose leases lapsed; queue again
  // the jobs Redis lost before any host took them (a restart without persistence); learn the hosts.
  async #check(): Promise<void> {
    const cmd = this.#queueConnection;
    if (cmd === undefined) return;
    const o = this.options;
    try {
      await cmd.set(this.#names.ownerLease(o.ownerId), this.#leaseValue(), 'PX', o.ownerLeaseMs);
      const byHost = new Map<string, OwnedAttempt[]>();
      const queued: OwnedAttempt[] = [];
      const now = this.#now();
      for (const a of this.#byJob.values()) {
        if (a.phase === 'granted' && a.hostId !== undefined) {
          const list = byHost.get(a.hostId) ?? [];
          list.push(a);
          byHost.set(a.hostId, list);
        } else if (a.phase === 'queued' && now - a.since >= o.leaseCheckMs && queued.length < 256) queued.push(a);
      }
      if (byHost.size > 0) {
        const hosts = [...byHost.keys()];
        const alive = await Promise.all(hosts.map((h) => cmd.exists(this.#names.hostLease(h))));
        hosts.forEach((h, i) => {
          if (alive[i] !== 0) return;
          for (const a of byHost.get(h) ?? []) this.#lose(a, `the lease of worker host ${h} lapsed`);
        });
      }
      const queue = this.#queue;
      if (queue !== undefined && queued.length > 0) {
        const states = await Promise.all(queued.map((a) => queue.getJobState(a.jobId)));
        queued.forEach((a, i) => {
          if (states[i] === 'unknown' && a.phase === 'queued') void this.#addJob(a);
        });
      }
      // The slots hosts lend are for deferring nested tasks: a scan of the keyspace a second is plenty.
      if (now - this.#scannedAt >= 1000) await this.#scanHosts();
    } catch {
      // Redis is away: the next check tries again (leases it cannot read are not taken as lapsed).
    }
  }

  async #scanHosts(): Promise<void> {
    const cmd = this.#queueConnection;
    if (cmd === undefined) return;
    this.#scannedAt = this.#now();
    const keys: string[] = [];
    let cursor = '0';
    do {
      const [next, found] = await cmd.scan(cursor, 'MATCH', this.#names.hostLeases(), 'COUNT', 200);
      cursor = next;
      keys.push(...found);
    } while (cursor !== '0' && keys.length < 10_000);
    const values = keys.length === 0 ? [] : await cmd.mget(...keys);
    const hosts = new Map<string, HostSeen>();
    keys.forEach((key, i) => {
      const [build, slots] = (values[i] ?? '').split(' ');
      const n = Number(slots);
      if (build !== undefined && Number.isSafeInteger(n)) hosts.set(this.#names.hostOfLease(key), { build, slots: n });
    });
    this.#hosts = hosts;
  }

  // ---- ends

  #finish(a: OwnedAttempt, end: RunEnd, usage = NO_USAGE): void {
    if (a.phase === 'ended') return;
    const wasLive = a.phase === 'queued' || a.phase === 'granted';
    a.phase = 'ended';
    const clock = this.#clock();
    if (a.backstop !== undefined) clock.clearTimeout(a.backstop);
    if (this.#byJob.get(a.jobId) === a) this.#byJob.delete(a.jobId);
    if (a.hostId !== undefined) this.#remember(a.jobId, a.hostId);
    if (this.#byCapability.get(a.capability) === a) this.#byCapability.delete(a.capability);
    if (a.cancelled !== undefined || end.status === 'cancelled') {
      void this.#cmd?.del(this.#names.cancelFlag(a.jobId)).catch(() => {});
    }
    this.#completed++;
    if (a.tenant !== undefined) {
      const held = this.#tenantHeld.get(a.tenant);
      const i = held?.indexOf(a) ?? -1;
      if (held !== undefined && i >= 0) held.splice(i, 1);
      if (wasLive) {
        this.#tenantLive.set(a.tenant, Math.max(0, (this.#tenantLive.get(a.tenant) ?? 1) - 1));
        const next = held?.shift();
        if (next !== undefined) this.#enqueue(next);
      }
      if (held?.length === 0) this.#tenantHeld.delete(a.tenant);
    }
    a.resolve({ end, usage });
    if (this.#byJob.size === 0) this.#drained?.();
  }

  // The host of a job that ended here, to answer its late messages.
  #remember(jobId: string, hostId: string): void {
    this.#endedOn.set(jobId, hostId);
    if (this.#endedOn.size > ENDED_KEPT) this.#endedOn.delete(this.#endedOn.keys().next().value as string);
  }

  // ---- sending

  #toHost(a: OwnedAttempt, message: ToHost): void {
    if (a.hostId === undefined) return;
    this.#publish(this.#names.toHost(a.hostId), message);
  }

  #ack(a: OwnedAttempt, rseq: number, ok: 0 | 1, value: unknown): void {
    this.#ackTo(a.hostId, a.jobId, rseq, ok, value);
  }

  #ackTo(hostId: string | undefined, jobId: string, rseq: number, ok: 0 | 1, value: unknown): void {
    // A late message's host is known from its attempt only; one of an unknown attempt gets its
    // refusal on the channel of the host that held the job last, if any.
    const host = hostId ?? this.#byJob.get(jobId)?.hostId ?? this.#endedOn.get(jobId);
    if (host === undefined) return;
    this.#publish(this.#names.toHost(host), ['ack', jobId, rseq, ok, value]);
  }

  #publish(channel: string, message: ToHost): void {
    const cmd = this.#cmd;
    if (cmd === undefined) return;
    let bytes: Buffer;
    try {
      bytes = encodeWire(message);
    } catch (error) {
      if (message[0] !== 'ack' || message[3] !== 1) return;
      // A reply that cannot cross (an approval handler returned a function): the call fails instead.
      bytes = encodeWire([
        'ack',
        message[1],
        message[2],
        0,
        encodeError(
          new TroupeError(`the API host's answer cannot cross to the worker host: ${(error as Error).message}`, {
            code: 'ERR_NOT_CLONEABLE',
          }),
        ),
      ]);
    }
    if (bytes.length > this.options.maxRelayBytes && message[0] === 'grant') {
      const a = this.#byJob.get(message[1]);
      if (a !== undefined) {
        this.#finish(a, {
          status: 'failed',
          error: new TroupeError(
            `attempt ${a.jobId}'s grant is ${bytes.length} bytes, over maxRelayBytes (${this.options.maxRelayBytes}): pass a leaner scope and toolContext, or raise maxRelayBytes on every host`,
            { code: 'ERR_INVALID_ARGUMENT' },
          ),
          events: [],
          turns: 0,
        });
      }
      return;
    }
    void cmd.publish(channel, bytes).catch(() => {});
  }

  /** This API host's lease: `<build> <incarnation>`. */
  #leaseValue(): string {
    return `${this.options.build} ${this.#incarnation}`;
  }

  #clock() {
    return (this.#host as TransportHost).clock;
  }

  #now(): number {
    return this.#host?.clock.now() ?? Date.now();
  }
}
