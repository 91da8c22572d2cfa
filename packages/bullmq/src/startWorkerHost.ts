import { EventEmitter } from 'node:events';
import {
  type Agent,
  type AgentId,
  type CancelReason,
  ClosedError,
  isAgent,
  type RunId,
  TroupeError,
} from '@troupe/core';
import { decodeError, ErrorShape, encodeError, freezeReceived, type HostTaskResult } from '@troupe/core/internal';
import { loadAgent, systemClock } from '@troupe/subagent';
import {
  type Attempt,
  type AttemptHandle,
  type AttemptWork,
  type HostOperations,
  localTransport,
  type RunTransport,
  type SupervisorEvents,
  type TransportHost,
} from '@troupe/supervisor';
import { type Job, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { ClusterError, VersionSkewError } from './ClusterError.js';
import { encodeEnd } from './internal/EndWire.js';
import { JOB_VERSION, JobData } from './internal/JobData.js';
import { probeRedis, redisClient } from './internal/openRedis.js';
import { RedisNames } from './internal/RedisNames.js';
import { RelayClient } from './internal/RelayClient.js';
import { decodeToHost, encodeWire, type Grant, type ToOwner, WIRE_VERSION } from './internal/Wire.js';
import {
  type ResolvedWorkerHostOptions,
  resolveWorkerHostOptions,
  type WorkerHostOptions,
} from './WorkerHostOptions.js';

/**
 * The events of a {@link WorkerHost} (`host.on(name, listener)`).
 *
 * @example
 * ```ts
 * declare const host: WorkerHost
 * host.on('attempt.ended', (e: WorkerHostEvents['attempt.ended'][0]) => console.log(e.jobId, e.status))
 * ```
 */
export interface WorkerHostEvents {
  /** A granted attempt went to a slot of this host. */
  'attempt.started': [{ readonly jobId: string; readonly agent: string; readonly owner: string }];
  /** It ended here (`status`: its end; `lost`: it was handed back or its lock lost). */
  'attempt.ended': [{ readonly jobId: string; readonly status: string }];
  /** A job refused or denied: nothing of it ran. */
  'job.refused': [{ readonly jobId: string; readonly error: Error }];
  /** Something the host channel of its threads refused (as the supervisor's `host.refused`). */
  'host.refused': SupervisorEvents['host.refused'];
  'worker.recycled': SupervisorEvents['worker.recycled'];
  /** Redis or BullMQ reported an error (the host goes on; ioredis reconnects). */
  error: [Error];
}

/**
 * What a worker host reports of itself (`host.stats()`).
 *
 * @example
 * ```ts
 * declare const host: WorkerHost
 * const { running, handedBack }: WorkerHostStats = host.stats()
 * ```
 */
export interface WorkerHostStats {
  readonly running: number;
  /** Attempts that ended here. */
  readonly completed: number;
  /** Jobs refused or denied here (nothing of them ran). */
  readonly refused: number;
  /** Attempts handed back (drain) or lost (lock renewal failed, owner gone). */
  readonly handedBack: number;
}

/** One attempt running here. */
interface Running {
  readonly jobId: string;
  readonly runId: string;
  readonly owner: string;
  /** The owner's incarnation its grant named (its lease names it while that owner lives). */
  readonly incarnation: string | undefined;
  readonly relay: RelayClient;
  handle: AttemptHandle | undefined;
  /** A cancel that came before the local dispatch. */
  cancel: CancelReason | undefined;
  /** Handed back or lost: its end is not reported (its owner runs it again elsewhere). */
  lost: boolean;
  /** Its handback, settled when the owner acknowledged or refused it (or the relay failed). */
  handback: Promise<void> | undefined;
}

interface Claim {
  readonly nonce: string;
  readonly resolve: (grant: Grant) => void;
  readonly reject: (error: Error) => void;
}

/**
 * Start a worker host: it takes attempts from the BullMQ queue its API hosts
 * fill (see `bullmqTransport`), claims each one from its owner, and runs it on
 * this machine's own pool of worker threads — the same subagent runtime,
 * cancellation table and watchdog as a single-process supervisor's. What the
 * run asks of its supervisor travels back to the owner; cancels come from it.
 *
 * An agent is named across hosts by a logical id: `agents` maps each id to
 * an agent (or the module that exports it). A job of an id this host does not
 * know, or of another build, is refused (`ERR_UNKNOWN_AGENT`,
 * `ERR_VERSION_SKEW`) and nothing of it runs.
 *
 * Rejects with `ERR_REDIS_UNREACHABLE` or `ERR_REDIS_CONFIG` with nothing
 * started. `close()` drains: stops taking jobs, lets running attempts go on
 * for `drainMs`, then hands the rest back to their owners (who run them again
 * elsewhere from their last checkpoint) and stops them.
 *
 * @example
 * ```ts
 * const host = await startWorkerHost({
 *   connection: 'redis://127.0.0.1:6379',
 *   build: '2026.12.1',
 *   agents: { researcher: { module: new URL('./agents.js', import.meta.url).href, name: 'researcher' } },
 *   concurrency: 4,
 * })
 * process.once('SIGTERM', () => void host.close())
 * ```
 */
export async function startWorkerHost(options: WorkerHostOptions): Promise<WorkerHost> {
  const o = resolveWorkerHostOptions(options);
  const agents = new Map<string, Agent>();
  for (const [id, entry] of o.agents) {
    agents.set(id, isAgent(entry) ? entry : await loadAgent(entry.module, entry.name));
  }
  await probeRedis(o.connection, o.connectionName, o.connectTimeoutMs);
  const transport =
    o.transport?.({ slots: o.concurrency, graceMs: o.graceMs }) ??
    localTransport({ threads: o.concurrency, graceMs: o.graceMs });
  const host = new WorkerHost(o, agents, transport);
  await host.open();
  return host;
}

/**
 * A running worker host (see {@link startWorkerHost}): its id, its stats, its
 * events, and `close()` (drain) / `destroy()` (now).
 *
 * @example
 * ```ts
 * declare const host: WorkerHost
 * host.on('job.refused', (e) => console.warn(`${e.jobId}: ${e.error.message}`))
 * console.log(host.hostId, host.stats().running)
 * await host.close()
 * ```
 */
export class WorkerHost extends EventEmitter<WorkerHostEvents> {
  /** The options, validated and defaulted. */
  readonly options: ResolvedWorkerHostOptions;
  readonly #agents: ReadonlyMap<string, Agent>;
  readonly #transport: RunTransport;
  readonly #names: RedisNames;
  readonly #running = new Map<string, Running>();
  readonly #claims = new Map<string, Claim>();
  #cmd: Redis | undefined;
  #sub: Redis | undefined;
  #worker: Worker | undefined;
  /** The connection its BullMQ worker was given (BullMQ closes only the ones it makes). */
  #workerConnection: Redis | undefined;
  #leaseTimer: ReturnType<typeof setInterval> | undefined;
  #retryTimer: ReturnType<typeof setInterval> | undefined;
  #closing: Promise<void> | undefined;
  #completed = 0;
  #refused = 0;
  #handedBack = 0;
  /** Owners whose lease was missing at the last renewal. */
  readonly #ownerMissing = new Set<string>();

  /** @internal Made by {@link startWorkerHost}. */
  constructor(options: ResolvedWorkerHostOptions, agents: ReadonlyMap<string, Agent>, transport: RunTransport) {
    super();
    this.options = options;
    this.#agents = agents;
    this.#transport = transport;
    this.#names = new RedisNames(options.prefix, options.queue);
  }

  /** This host's id (in leases, channels, events and `AttemptPlacement.host`). */
  get hostId(): string {
    return this.options.hostId;
  }

  stats(): WorkerHostStats {
    return {
      running: this.#running.size,
      completed: this.#completed,
      refused: this.#refused,
      handedBack: this.#handedBack,
    };
  }

  /** @internal */
  async open(): Promise<void> {
    const o = this.options;
    const transportHost: TransportHost = {
      clock: systemClock,
      emit: (name, payload) => {
        if (name === 'host.refused') this.emit('host.refused', payload as SupervisorEvents['host.refused'][0]);
        else this.emit('worker.recycled', payload as SupervisorEvents['worker.recycled'][0]);
      },
      listening: (name) => this.listenerCount(name as keyof WorkerHostEvents) > 0,
    };
    try {
      this.#transport.start(transportHost);
      await this.#transport.ready();
      this.#cmd = redisClient(o.connection, `troupe-host-${o.hostId}`);
      this.#sub = redisClient(o.connection, `troupe-host-${o.hostId}-sub`);
      this.#cmd.on('error', (e: Error) => this.#error(e));
      this.#sub.on('error', (e: Error) => this.#error(e));
      await Promise.all([this.#cmd.connect(), this.#sub.connect()]);
      this.#sub.on('messageBuffer', (_channel: Buffer, message: Buffer) => this.#onMessage(message));
      // After every reconnect: cancels sent meanwhile are re-read from their flags, unacknowledged
      // relayed messages sent again (ioredis subscribes again by itself).
      this.#sub.on('ready', () => void this.#afterReconnect());
      await this.#sub.subscribe(this.#names.toHost(o.hostId));
      await this.#renewLease();
      this.#leaseTimer = setInterval(() => void this.#renewLease(), Math.max(10, Math.floor(o.leaseMs / 3)));
      this.#retryTimer = setInterval(() => this.#retry(), o.relayRetryMs);
      this.#leaseTimer.unref();
      this.#retryTimer.unref();
      this.#workerConnection = redisClient(o.connection, `troupe-host-${o.hostId}-worker`);
      this.#workerConnection.on('error', () => {});
      this.#worker = new Worker(o.queue, (job, token) => this.#process(job, token), {
        connection: this.#workerConnection,
        prefix: o.prefix,
        name: o.hostId,
        concurrency: o.concurrency,
        lockDuration: o.lockDurationMs,
        stalledInterval: o.stalledIntervalMs,
        // Troupe owns retries: a stalled job fails (its owner sees the attempt lost), never re-runs.
        maxStalledCount: 0,
        removeOnComplete: { count: 0 },
        removeOnFail: { count: 0 },
      });
      this.#worker.on('error', (e: Error) => this.#error(e));
      // BullMQ does not stop a job whose lock it could not renew (another host may take it): stop it here.
      this.#worker.on('lockRenewalFailed', (jobIds: string[]) => {
        for (const id of jobIds) this.#giveUp(id, 'its BullMQ lock could not be renewed');
      });
      await this.#worker.waitUntilReady();
    } catch (error) {
      await this.#teardown(true);
      throw error;
    }
  }

  /**
   * Drain and stop: take no more jobs; let running attempts go on for
   * `drainMs`; hand the rest back to their owners and stop them; then close
   * the threads and connections. Idempotent.
   */
  close(): Promise<void> {
    this.#closing ??= this.#drain();
    return this.#closing;
  }

  /** Stop now: running attempts are handed back and killed. Idempotent. */
  async destroy(): Promise<void> {
    if (this.#closing !== undefined) return this.#closing;
    this.#closing = (async () => {
      for (const id of [...this.#running.keys()]) this.#giveUp(id, 'its worker host was destroyed', true);
      await this.#worker?.close(true).catch(() => {});
      await this.#teardown(true);
    })();
    return this.#closing;
  }

  /** `await using host = await startWorkerHost(...)` closes it. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  async #drain(): Promise<void> {
    const worker = this.#worker;
    // Stop fetching; BullMQ's close waits for the jobs running here.
    const stopped = worker?.close().catch(() => {});
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      stopped,
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, this.options.drainMs);
      }),
    ]);
    clearTimeout(timer);
    for (const id of [...this.#running.keys()]) this.#giveUp(id, 'its worker host drained', true);
    await stopped;
    await this.#teardown(false);
  }

  async #teardown(now: boolean): Promise<void> {
    if (this.#leaseTimer !== undefined) clearInterval(this.#leaseTimer);
    if (this.#retryTimer !== undefined) clearInterval(this.#retryTimer);
    this.#leaseTimer = this.#retryTimer = undefined;
    for (const claim of this.#claims.values()) claim.reject(new ClosedError('the worker host closed'));
    this.#claims.clear();
    await (now ? this.#transport.destroy() : this.#transport.close({ drainMs: 0 })).catch(() => {});
    const cmd = this.#cmd;
    const sub = this.#sub;
    const workerConnection = this.#workerConnection;
    this.#cmd = this.#sub = this.#workerConnection = undefined;
    if (!now) await cmd?.del(this.#names.hostLease(this.options.hostId)).catch(() => {});
    if (now) await this.#worker?.close(true).catch(() => {});
    for (const client of [sub, cmd, workerConnection]) {
      if (client === undefined) continue;
      if (now) client.disconnect();
      else await client.quit().catch(() => client.disconnect());
    }
  }

  #error(error: Error): void {
    if (this.listenerCount('error') > 0) this.emit('error', error);
  }

  // ---- one job: check, claim, run, report

  async #process(job: Job, _token: string | undefined): Promise<string> {
    const jobId = String(job.id);
    const parsed = JobData.safeParse(job.data);
    if (!parsed.success) {
      throw this.#refusedJob(
        jobId,
        new ClusterError(`job ${jobId} is not a Troupe attempt: ${parsed.error.issues[0]?.message ?? ''}`, {
          code: 'ERR_PROTOCOL',
        }),
      );
    }
    const d = parsed.data;
    if (d.v !== JOB_VERSION) {
      return this.#refuse(jobId, d, new VersionSkewError('job protocol', String(d.v), String(JOB_VERSION)));
    }
    if (d.build !== this.options.build)
      return this.#refuse(jobId, d, new VersionSkewError('job', d.build, this.options.build));
    const agent = this.#agents.get(d.agent);
    if (agent === undefined) {
      return this.#refuse(
        jobId,
        d,
        new TroupeError(
          `worker host ${this.hostId} runs no agent "${d.agent}" (it runs ${[...this.#agents.keys()].join(', ')}): add it to the host's agents`,
          { code: 'ERR_UNKNOWN_AGENT' },
        ),
      );
    }
    let grant: Grant;
    try {
      grant = await this.#claim(jobId, d);
    } catch (error) {
      throw this.#refusedJob(jobId, error as Error);
    }
    return this.#run(jobId, d, agent, grant);
  }

  // Tell the owner this host cannot run the job (it ends the attempt with `error`), and fail the job.
  #refuse(jobId: string, d: JobData, error: Error): never {
    this.#toOwner(d.owner, ['refuse', WIRE_VERSION, jobId, d.nonce, this.hostId, encodeError(error)]);
    throw this.#refusedJob(jobId, error);
  }

  #refusedJob(jobId: string, error: Error): Error {
    this.#refused++;
    if (this.listenerCount('job.refused') > 0) this.emit('job.refused', { jobId, error });
    return error;
  }

  #claim(jobId: string, d: JobData): Promise<Grant> {
    const message: ToOwner = ['claim', WIRE_VERSION, jobId, d.nonce, this.hostId, this.options.build];
    return new Promise<Grant>((resolve, reject) => {
      const started = Date.now();
      // Pub/sub may drop a claim or its answer (a reconnect): claim again until answered or too late.
      const again = setInterval(() => {
        if (Date.now() - started >= this.options.claimTimeoutMs) {
          settle();
          reject(
            new ClusterError(
              `no grant for job ${jobId} from its owner ${d.owner} within ${this.options.claimTimeoutMs} ms: nothing ran`,
              { code: 'ERR_HOST_REFUSED' },
            ),
          );
          return;
        }
        this.#toOwner(d.owner, message);
      }, this.options.relayRetryMs);
      const settle = () => {
        clearInterval(again);
        this.#claims.delete(jobId);
      };
      this.#claims.set(jobId, {
        nonce: d.nonce,
        resolve: (g) => {
          settle();
          resolve(g);
        },
        reject: (e) => {
          settle();
          reject(e);
        },
      });
      this.#toOwner(d.owner, message);
    });
  }

  async #run(jobId: string, d: JobData, agent: Agent, grant: Grant): Promise<string> {
    await this.#supersede(jobId, d);
    const relay = new RelayClient(jobId, grant.capability, this.options.maxRelayBytes, (bytes) =>
      this.#publish(this.#names.toOwner(d.owner), bytes),
    );
    const running: Running = {
      jobId,
      runId: d.runId,
      owner: d.owner,
      incarnation: grant.incarnation,
      relay,
      handle: undefined,
      cancel: undefined,
      lost: false,
      handback: undefined,
    };
    this.#running.set(jobId, running);
    const now = () => Date.now();
    let receipt: string | undefined;
    const host: HostOperations = {
      agentId: grant.agentId,
      runId: d.runId,
      approve: (request) => relay.call('approve', request, now()),
      task: (request) => relay.call('task', request, now()) as Promise<HostTaskResult | undefined>,
      events: (events) => relay.notice('events', events, now()),
      checkpoint: async (checkpoint) => {
        // The receipt it came with is this host's channel's (its thread's proof); the owner's channel
        // asks for the receipt it answered the attempt's last relayed checkpoint with.
        const { receipt: _thread, ...rest } = checkpoint;
        const reply = await relay.call('checkpoint', receipt === undefined ? rest : { ...rest, receipt }, now());
        receipt = typeof reply === 'string' ? reply : undefined;
        return reply;
      },
    };
    const attempt: Attempt = {
      runId: d.runId as RunId,
      attempt: d.attempt,
      capability: grant.capability,
      agentId: grant.agentId as AgentId,
      parentAgentId: grant.parentAgentId as AgentId | undefined,
      agent,
      scope: freezeReceived(grant.scope),
      toolContext: freezeReceived(grant.toolContext) as Readonly<Record<string, unknown>>,
      work: grant.work as AttemptWork,
      timeoutMs: grant.timeoutMs,
      features: grant.features,
      cancelled: grant.cancelled,
      host,
      placed: (p) => relay.notice('placed', [p.threadId], now()),
    };
    if (this.listenerCount('attempt.started') > 0)
      this.emit('attempt.started', { jobId, agent: d.agent, owner: d.owner });
    const handle = this.#transport.dispatch(attempt);
    running.handle = handle;
    if (running.cancel !== undefined) this.#transport.cancel(handle, running.cancel);
    else void this.#readFlag(running);
    const ended = await handle.ended;
    let status: string = ended.end.status;
    if (running.lost) {
      status = 'lost';
      // The handback is what tells a live owner to run it again when nothing else will (its host's
      // lease renewed and its job gone with a Redis restarted empty): sent again until answered,
      // for at most claimTimeoutMs, before the relay stops.
      if (running.handback !== undefined) await settledWithin(running.handback, this.options.claimTimeoutMs);
    } else {
      // The end is the attempt's last message: the owner has served everything before it.
      await relay.call('end', encodeEnd(ended), now()).catch(() => {});
    }
    relay.fail(new ClosedError(`attempt ${jobId} ended`));
    this.#running.delete(jobId);
    this.#completed++;
    if (this.listenerCount('attempt.ended') > 0) this.emit('attempt.ended', { jobId, status });
    return status;
  }

  // Its owner granted an attempt of a run this host still runs an older attempt (or leg) of: the
  // old one lost its job here unseen (Redis restarted empty, a lock lost while a message was
  // missed) and the owner has already ended it. Stop it, and wait for its end (at most the
  // grace): the run's cancellation slot is its own until then (the new attempt would be refused
  // by it, end lost, and could be refused again until the run's attempts ran out).
  async #supersede(jobId: string, d: JobData): Promise<void> {
    const stale: Promise<unknown>[] = [];
    for (const r of this.#running.values()) {
      if (r.runId !== d.runId || r.jobId === jobId || r.owner !== d.owner || r.handle === undefined) continue;
      const why = `attempt ${r.jobId} was superseded by ${jobId}`;
      // Cancelled as a lost attempt is (its tools see it; the grace then kills it), unless it is already.
      if (!r.lost) {
        r.relay.fail(new ClosedError(why));
        this.#giveUp(r.jobId, why);
      }
      stale.push(r.handle.ended);
    }
    await Promise.all(stale);
  }

  // Hand an attempt back to its owner (who runs it again elsewhere) and stop it here.
  #giveUp(jobId: string, why: string, kill = false): void {
    const running = this.#running.get(jobId);
    if (running === undefined || running.lost) return;
    running.lost = true;
    this.#handedBack++;
    running.handback = running.relay.call('handback', [why], Date.now()).then(
      () => {},
      () => {},
    );
    if (running.handle === undefined) running.cancel = 'shutdown';
    else if (kill) this.#transport.kill(running.handle, 'shutdown');
    else this.#transport.cancel(running.handle, 'shutdown');
  }

  // ---- messages from owners

  #onMessage(bytes: Buffer): void {
    const message = decodeToHost(bytes, this.options.maxRelayBytes);
    if (typeof message === 'string') return; // Not ours to act on; nothing in it is trusted.
    switch (message[0]) {
      case 'grant':
      case 'deny': {
        const claim = this.#claims.get(message[1]);
        if (claim === undefined || claim.nonce !== message[2]) return;
        if (message[0] === 'grant') claim.resolve(message[3]);
        else claim.reject(rebuild(message[3]));
        return;
      }
      case 'ack':
        this.#running.get(message[1])?.relay.acked(message[2], message[3], message[4]);
        return;
      case 'cancel':
      case 'kill': {
        const running = this.#running.get(message[1]);
        if (running === undefined) return;
        if (running.handle === undefined) running.cancel ??= message[2];
        else if (message[0] === 'kill') this.#transport.kill(running.handle, message[2]);
        else this.#transport.cancel(running.handle, message[2]);
        return;
      }
      default:
        message satisfies never;
    }
  }

  async #readFlag(running: Running): Promise<void> {
    const reason = await this.#cmd?.get(this.#names.cancelFlag(running.jobId)).catch(() => null);
    if (reason === null || reason === undefined || running.handle === undefined) return;
    if (reason === 'user' || reason === 'parent' || reason === 'deadline' || reason === 'shutdown') {
      this.#transport.cancel(running.handle, reason);
    }
  }

  async #afterReconnect(): Promise<void> {
    for (const running of this.#running.values()) {
      running.relay.resend(Date.now(), 0);
      void this.#readFlag(running);
    }
  }

  #retry(): void {
    const now = Date.now();
    for (const running of this.#running.values()) running.relay.resend(now, this.options.relayRetryMs);
  }

  // Renew this host's lease; stop the attempts of owners whose leases lapsed, or name another
  // incarnation (the API host restarted under the same id): nobody awaits them.
  async #renewLease(): Promise<void> {
    const cmd = this.#cmd;
    if (cmd === undefined) return;
    const o = this.options;
    try {
      await cmd.set(this.#names.hostLease(o.hostId), `${o.build} ${o.concurrency}`, 'PX', o.leaseMs);
      if (this.#running.size === 0) return;
      const owners = [...new Set([...this.#running.values()].map((r) => r.owner))];
      const leases = await cmd.mget(...owners.map((owner) => this.#names.ownerLease(owner)));
      owners.forEach((owner, i) => {
        const lease = leases[i];
        if (lease === null || lease === undefined) {
          // Missing twice in a row: once may be a Redis that restarted empty before the owner renewed.
          if (!this.#ownerMissing.has(owner)) {
            this.#ownerMissing.add(owner);
            return;
          }
          this.#ownerMissing.delete(owner);
          this.#dropOwner(owner, `its API host ${owner} is gone`);
          return;
        }
        this.#ownerMissing.delete(owner);
        const incarnation = lease.split(' ')[1];
        if (incarnation !== undefined) this.#dropOwner(owner, `its API host ${owner} restarted`, incarnation);
      });
    } catch (error) {
      this.#error(error as Error);
    }
  }

  // Stop the attempts of `owner`: all of them, or those granted by another incarnation than `alive`.
  #dropOwner(owner: string, why: string, alive?: string): void {
    for (const r of this.#running.values()) {
      if (r.owner !== owner || r.lost) continue;
      if (alive !== undefined && (r.incarnation === undefined || r.incarnation === alive)) continue;
      r.relay.fail(new ClosedError(why));
      this.#giveUp(r.jobId, why, true);
    }
  }

  #toOwner(owner: string, message: ToOwner): void {
    this.#publish(this.#names.toOwner(owner), encodeWire(message));
  }

  #publish(channel: string, bytes: Buffer): void {
    void this.#cmd?.publish(channel, bytes).catch(() => {});
  }
}

/** Resolves when `promise` settles or `ms` have passed, whichever is first. */
function settledWithin(promise: Promise<void>, ms: number): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([promise, new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]).finally(() =>
    clearTimeout(timer),
  );
}

function rebuild(shape: unknown): Error {
  return decodeErrorShape(shape) ?? new ClusterError('the API host denied the claim', { code: 'ERR_HOST_REFUSED' });
}

function decodeErrorShape(shape: unknown): Error | undefined {
  const parsed = ErrorShape.safeParse(shape);
  return parsed.success ? decodeError(parsed.data) : undefined;
}
