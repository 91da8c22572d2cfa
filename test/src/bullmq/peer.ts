// The test's end of the cluster protocol over a real Redis: a worker host as
// the test plays it (claims, refusals, relayed messages, its lease), and the
// run tree's side of an attempt (HostOperations that record what they serve).
// Each side of @troupe/bullmq is tested against the other side's messages as
// they cross Redis, byte for byte.
import { deserialize, serialize } from 'node:v8';
import { RedisNames, type RelayKind, type ToHost, type ToOwner, WIRE_VERSION } from '@troupe/bullmq/internal';
import { type Agent, type AgentId, createId, defineAgent, type RunId } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import type { Attempt, HostOperations, SupervisorEvents, TransportHost } from '@troupe/supervisor';
import { systemClock } from '@troupe/supervisor';
import { type Job, Queue } from 'bullmq';
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
