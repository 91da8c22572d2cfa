// The test's end of the cluster protocol over a real Redis: a worker host as
// the test plays it (claims, refusals, relayed messages, its lease), and the
// run tree's side of an attempt (HostOperations that record what they serve).
// Each side of @troupe/bullmq is tested against the other side's messages as
// they cross Redis, byte for byte.
import { deserialize, serialize } from 'node:v8';
import { RedisNames, type RelayKind, type ToHost, type ToOwner, WIRE_VERSION } from '@troupe/bullmq/internal';
import { type Agent, type AgentId, createId, defineAgent, type RunId } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import type { Attempt, HostOperations, RunTransport, SupervisorEvents, TransportHost } from '@troupe/supervisor';
import { systemClock } from '@troupe/supervisor';
import { type Job, Queue, QueueEvents } from 'bullmq';
import { Redis } from 'ioredis';

export const helper: Agent = defineAgent({
  name: 'helper',
  module: import.meta.url,
  instructions: 'Help.',
  model: ScriptedModel.answering('done'),
});

/** What a test's run tree served of an attempt. */
export interface Served {
  readonly approvals: unknown[];
  readonly tasks: unknown[];
  readonly events: unknown[][];
  readonly checkpoints: unknown[];
  readonly placements: unknown[];
}

/** An attempt as the tree would dispatch it, with HostOperations that record what they serve. */
export function makeAttempt(overrides: Partial<Attempt> & { readonly approve?: HostOperations['approve'] } = {}): {
  attempt: Attempt;
  served: Served;
} {
  const served: Served = { approvals: [], tasks: [], events: [], checkpoints: [], placements: [] };
  const runId = overrides.runId ?? createId('run');
  const host: HostOperations = {
    agentId: 'helper-1',
    runId,
    approve:
      overrides.approve ??
      (async (r) => {
        served.approvals.push(r);
        return { decision: 'approve' };
      }),
    task: async (r) => {
      served.tasks.push(r);
      return { status: 'done', result: 'child done', events: [] };
    },
    events: (e) => {
      served.events.push([...e]);
    },
    checkpoint: async (c) => {
      served.checkpoints.push(c);
      return true;
    },
  };
  const attempt: Attempt = {
    runId: runId as RunId,
    attempt: 1,
    capability: createCapability(),
    agentId: 'helper-1' as AgentId,
    parentAgentId: undefined,
    agent: helper,
    scope: Object.freeze({ tenant: 't1', marker: 'SCOPE-MARKER-7f3a' }),
    toolContext: Object.freeze({ flag: 'TOOLCONTEXT-MARKER-9c1e' }),
    work: { kind: 'start', input: 'hello', metadata: undefined },
    timeoutMs: undefined,
    features: 0,
    cancelled: undefined,
    host,
    placed: (p) => {
      served.placements.push(p);
    },
    ...overrides,
  };
  return { attempt, served };
}

let capabilities = 0;
/** A well-formed capability (24 base64url characters), unique in this process. */
export function createCapability(): string {
  capabilities++;
  return `cap${String(capabilities).padStart(6, '0')}abcdefghijklmno`.slice(0, 24);
}

/** A TransportHost recording the transport's events. */
export function transportHost(): TransportHost & { readonly refused: SupervisorEvents['host.refused'][0][] } {
  const refused: SupervisorEvents['host.refused'][0][] = [];
  return {
    clock: systemClock,
    refused,
    emit: (name, payload) => {
      if (name === 'host.refused') refused.push(payload as SupervisorEvents['host.refused'][0]);
    },
    listening: () => true,
  };
}

/** A worker host as the test plays it. */
export class PeerHost {
  readonly hostId: string;
  readonly names: RedisNames;
  readonly #pub: Redis;
  readonly #sub: Redis;
  readonly queue: Queue;
  readonly received: ToHost[] = [];
  #waiters: { match: (m: ToHost) => boolean; resolve: (m: ToHost) => void }[] = [];

  private constructor(url: string, hostId: string, prefix: string, queueName: string) {
    this.hostId = hostId;
    this.names = new RedisNames(prefix, queueName);
    this.#pub = new Redis(url, { maxRetriesPerRequest: null });
    this.#sub = new Redis(url, { maxRetriesPerRequest: null });
    this.queue = new Queue(queueName, { connection: new Redis(url, { maxRetriesPerRequest: null }), prefix });
  }

  static async connect(url: string, hostId = 'peer-host', prefix = 'troupe', queue = 'runs'): Promise<PeerHost> {
    const peer = new PeerHost(url, hostId, prefix, queue);
    peer.#sub.on('messageBuffer', (_c: Buffer, bytes: Buffer) => {
      const m = deserialize(bytes) as ToHost;
      peer.received.push(m);
      const i = peer.#waiters.findIndex((w) => w.match(m));
      if (i >= 0) {
        const [w] = peer.#waiters.splice(i, 1);
        w?.resolve(m);
      }
    });
    await peer.#sub.subscribe(peer.names.toHost(hostId));
    return peer;
  }

  /** The next message of `kind` (already received or to come), of `jobId` when given, that `also` accepts. */
  next<K extends ToHost[0]>(
    kind: K,
    jobId?: string,
    also: (m: ToHost) => boolean = () => true,
  ): Promise<Extract<ToHost, readonly [K, ...unknown[]]>> {
    const match = (m: ToHost) => m[0] === kind && (jobId === undefined || m[1] === jobId) && also(m);
    const seen = this.received.findIndex(match);
    if (seen >= 0) {
      const [m] = this.received.splice(seen, 1);
      return Promise.resolve(m as Extract<ToHost, readonly [K, ...unknown[]]>);
    }
    return new Promise((resolve) => {
      this.#waiters.push({
        match,
        resolve: (m) => {
          this.received.splice(this.received.indexOf(m), 1);
          resolve(m as Extract<ToHost, readonly [K, ...unknown[]]>);
        },
      });
    });
  }

  /** The ack of `rseq` of `jobId`. */
  async ack(jobId: string, rseq: number): Promise<readonly [0 | 1, unknown]> {
    const m = await this.next('ack', jobId, (a) => a[2] === rseq);
    return [m[3], m[4]];
  }

  async job(jobId: string): Promise<Job | undefined> {
    for (;;) {
      const job = await this.queue.getJob(jobId);
      if (job !== undefined) return job;
      await new Promise<void>((r) => setImmediate(r));
    }
  }

  /** The nonce job `jobId` carries (once the job is there). */
  async nonce(jobId: string): Promise<string> {
    const job = await this.job(jobId);
    return (job as Job).data.nonce as string;
  }

  send(owner: string, message: ToOwner | unknown[]): Promise<number> {
    return this.#pub.publish(this.names.toOwner(owner), serialize(message));
  }

  claim(owner: string, jobId: string, nonce: string, build: string): Promise<number> {
    return this.send(owner, ['claim', WIRE_VERSION, jobId, nonce, this.hostId, build]);
  }

  relay(owner: string, jobId: string, capability: string, rseq: number, kind: RelayKind, payload: unknown) {
    return this.send(owner, ['relay', jobId, capability, rseq, kind, payload]);
  }

  lease(slots: number, ms: number, build = 'b1'): Promise<unknown> {
    return this.#pub.set(this.names.hostLease(this.hostId), `${build} ${slots}`, 'PX', ms);
  }

  dropLease(): Promise<number> {
    return this.#pub.del(this.names.hostLease(this.hostId));
  }

  command(...args: [string, ...(string | number)[]]): Promise<unknown> {
    return this.#pub.call(...args);
  }

  async close(): Promise<void> {
    await this.queue.close();
    await (this.queue.opts.connection as unknown as Redis).quit();
    await Promise.all([this.#pub.quit(), this.#sub.quit()]);
  }
}

/** An API host as the test plays it: it queues jobs and reads what worker hosts send it. */
export class PeerOwner {
  readonly ownerId: string;
  readonly names: RedisNames;
  readonly queue: Queue;
  readonly events: QueueEvents;
  readonly received: ToOwner[] = [];
  readonly failed = new Map<string, string>();
  readonly #pub: Redis;
  readonly #sub: Redis;
  #waiters: { match: (m: ToOwner) => boolean; resolve: (m: ToOwner) => void }[] = [];
  #failWaiters: { jobId: string; resolve: (reason: string) => void }[] = [];

  private constructor(url: string, ownerId: string, prefix: string, queueName: string) {
    this.ownerId = ownerId;
    this.names = new RedisNames(prefix, queueName);
    this.#pub = new Redis(url, { maxRetriesPerRequest: null });
    this.#sub = new Redis(url, { maxRetriesPerRequest: null });
    this.queue = new Queue(queueName, { connection: new Redis(url, { maxRetriesPerRequest: null }), prefix });
    this.events = new QueueEvents(queueName, { connection: new Redis(url, { maxRetriesPerRequest: null }), prefix });
  }

  static async connect(url: string, ownerId: string, queue: string, prefix = 'troupe'): Promise<PeerOwner> {
    const owner = new PeerOwner(url, ownerId, prefix, queue);
    owner.#sub.on('messageBuffer', (_c: Buffer, bytes: Buffer) => {
      const m = deserialize(bytes) as ToOwner;
      const i = owner.#waiters.findIndex((w) => w.match(m));
      if (i >= 0) owner.#waiters.splice(i, 1)[0]?.resolve(m);
      else owner.received.push(m);
    });
    owner.events.on('failed', ({ jobId, failedReason }) => {
      owner.failed.set(jobId, failedReason);
      const i = owner.#failWaiters.findIndex((w) => w.jobId === jobId);
      if (i >= 0) owner.#failWaiters.splice(i, 1)[0]?.resolve(failedReason);
    });
    await owner.#sub.subscribe(owner.names.toOwner(ownerId));
    await owner.events.waitUntilReady();
    return owner;
  }

  /** The next message of `kind` (received or to come). */
  next<K extends ToOwner[0]>(kind: K, also: (m: ToOwner) => boolean = () => true) {
    const match = (m: ToOwner) => m[0] === kind && also(m);
    const seen = this.received.findIndex(match);
    if (seen >= 0)
      return Promise.resolve(this.received.splice(seen, 1)[0] as Extract<ToOwner, readonly [K, ...unknown[]]>);
    return new Promise<Extract<ToOwner, readonly [K, ...unknown[]]>>((resolve) => {
      this.#waiters.push({ match, resolve: (m) => resolve(m as Extract<ToOwner, readonly [K, ...unknown[]]>) });
    });
  }

  /** Why job `jobId` failed, once it has. */
  failure(jobId: string): Promise<string> {
    const known = this.failed.get(jobId);
    if (known !== undefined) return Promise.resolve(known);
    return new Promise((resolve) => this.#failWaiters.push({ jobId, resolve }));
  }

  /** Queue one attempt's job, as an API host does. */
  async add(jobId: string, data: Record<string, unknown>): Promise<void> {
    await this.queue.add('run', data, { jobId, attempts: 1, removeOnComplete: true, removeOnFail: true });
  }

  publish(hostId: string, message: ToHost): Promise<number> {
    return this.#pub.publish(this.names.toHost(hostId), serialize(message));
  }

  lease(ms: number): Promise<unknown> {
    return this.#pub.set(this.names.ownerLease(this.ownerId), 'b1', 'PX', ms);
  }

  command(...args: [string, ...(string | number)[]]): Promise<unknown> {
    return this.#pub.call(...args);
  }

  async close(): Promise<void> {
    await Promise.all([this.queue.close(), this.events.close()]);
    await (this.queue.opts.connection as unknown as Redis).quit();
    await (this.events.opts.connection as unknown as Redis).quit();
    await Promise.all([this.#pub.quit(), this.#sub.quit()]);
  }
}

/**
 * A RunTransport that must never be asked to run anything: the worker host's
 * refusals and denials are checked to dispatch nothing (the threads that run
 * granted attempts come with the supervisor's LocalTransport).
 */
export function nothingRuns(): RunTransport & { readonly dispatched: Attempt[] } {
  const dispatched: Attempt[] = [];
  const transport = {
    name: 'nothing-runs',
    graceMs: 0,
    slots: 0,
    dispatched,
    start() {},
    ready: async () => {},
    dispatch(attempt: Attempt) {
      dispatched.push(attempt);
      throw new Error(`attempt ${attempt.runId}.${attempt.attempt} was dispatched: something ran`);
    },
    withdraw: () => false,
    cancel() {},
    kill() {},
    canQueue: () => true,
    stats: () => ({ slots: 0, queued: 0, running: 0, completed: 0, refused: 0 }),
    close: async () => {},
    destroy: async () => {},
  };
  return transport;
}
