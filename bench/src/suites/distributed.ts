import { type ChildProcess, fork } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { bullmqTransport } from '@troupe/bullmq';
import { startRedisServer } from '@troupe/bullmq/testing';
import { type AgentId, createId, defineAgent, type RunId } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import { systemClock } from '@troupe/supervisor';
import { Queue, QueueEvents } from 'bullmq';
import { Redis } from 'ioredis';
import type { Figure, Suite } from '../Suite.js';
import { median, quantile, round } from '../stats.js';

const here = (file: string) => fileURLToPath(new URL(`../distributed/${file}`, import.meta.url));

/** Fork a helper process and wait for its `ready`. */
async function start(file: string, args: readonly string[]): Promise<ChildProcess> {
  const child = fork(here(file), args, { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const [message] = (await once(child, 'message')) as [unknown];
  if (message !== 'ready') throw new Error(`${file}: expected ready, got ${JSON.stringify(message)}`);
  return child;
}

async function stop(child: ChildProcess): Promise<void> {
  const exited = once(child, 'exit');
  child.disconnect();
  await exited;
}

const ms = (samples: readonly number[]) => ({
  p50: round(median(samples)),
  p99: round(quantile(samples, 0.99)),
  samples: samples.length,
});

/** A raw BullMQ job's round trip (add → a worker in another process takes it → its completion seen here). */
async function rawRoundTrip(url: string, n: number, workers: number): Promise<number[]> {
  const queue = `raw-${workers}`;
  const children = await Promise.all(Array.from({ length: workers }, () => start('rawWorker.js', [url, queue, '1'])));
  const connection = new Redis(url, { maxRetriesPerRequest: null });
  const q = new Queue(queue, { connection, prefix: 'bench' });
  const events = new QueueEvents(queue, {
    connection: new Redis(url, { maxRetriesPerRequest: null }),
    prefix: 'bench',
  });
  await events.waitUntilReady();
  const samples: number[] = [];
  const waiting = new Map<string, () => void>();
  events.on('completed', ({ jobId }) => waiting.get(jobId)?.());
  try {
    for (let i = 0; i < n; i++) {
      const jobId = `raw-${i}`;
      const done = new Promise<void>((r) => waiting.set(jobId, r));
      const t0 = performance.now();
      await q.add('raw', {}, { jobId, removeOnComplete: true });
      await done;
      samples.push(performance.now() - t0);
      waiting.delete(jobId);
    }
  } finally {
    await Promise.all([q.close(), events.close()]);
    connection.disconnect();
    (events.opts.connection as unknown as Redis).disconnect();
    await Promise.all(children.map(stop));
  }
  return samples;
}

/** Pub/sub one way (publish here → arrival in another process), as a cancel message travels. */
async function pubsubOneWay(url: string, n: number): Promise<number[]> {
  const peer = await start('pubsubPeer.js', [url, 'bench-cancel']);
  const pub = new Redis(url);
  const sub = new Redis(url);
  const samples: number[] = [];
  try {
    let arrived: ((line: string) => void) | undefined;
    sub.on('message', (_c: string, m: string) => arrived?.(m));
    await sub.subscribe('bench-cancel:out');
    for (let i = 0; i < n; i++) {
      const reply = new Promise<string>((r) => {
        arrived = r;
      });
      const t0 = performance.timeOrigin + performance.now();
      await pub.publish('bench-cancel:in', String(i));
      const [, at] = (await reply).split(' ');
      samples.push(Number(at) - t0);
    }
  } finally {
    pub.disconnect();
    sub.disconnect();
    await stop(peer);
  }
  return samples;
}

/** A relayed host call (approval) through bullmqTransport, from a worker host's relay in another process. */
async function relayed(url: string, n: number): Promise<number[]> {
  const queue = 'relay';
  const transport = bullmqTransport({ connection: url, build: 'bench', queue });
  transport.start({ clock: systemClock, emit: () => {}, listening: () => false });
  await transport.ready();
  const host = await start('relayHost.js', [url, queue, String(n)]);
  const agent = defineAgent({
    name: 'bench',
    module: import.meta.url,
    instructions: '',
    model: ScriptedModel.answering('x'),
  });
  const runId = createId('run');
  const times = new Promise<number[]>((resolve) => {
    host.on('message', (m: { times?: number[] }) => {
      if (m.times !== undefined) resolve(m.times);
    });
  });
  transport.dispatch({
    runId: runId as RunId,
    attempt: 1,
    capability: 'benchbenchbenchbenchbenc',
    agentId: 'bench-1' as AgentId,
    parentAgentId: undefined,
    agent,
    scope: {},
    toolContext: {},
    work: { kind: 'start', input: '', metadata: undefined },
    timeoutMs: undefined,
    features: 0,
    cancelled: undefined,
    host: {
      agentId: 'bench-1',
      runId,
      approve: async () => ({ decision: 'approve' }),
      task: async () => undefined,
      events: () => {},
      checkpoint: async () => true,
    },
  });
  try {
    return await times;
  } finally {
    await stop(host);
    await transport.destroy();
  }
}

/**
 * Scale-out (issue 29): what crossing hosts through BullMQ on Redis costs, with
 * its own Redis on 127.0.0.1 and helper processes, against raw BullMQ and raw
 * pub/sub in the same run. Measured here: the raw job round trip (the
 * baseline), pub/sub one way (a cancel's path between hosts), and a relayed
 * host call through bullmqTransport. The figures that need worker hosts
 * running attempts on their own thread pools (cancel → the tool sees it,
 * overhead against a raw job, failover, fan-out throughput) come with the
 * supervisor's LocalTransport.
 */
export const distributedSuite: Suite = {
  name: 'distributed',
  description: 'scale-out over BullMQ/Redis: raw job round trip, pub/sub one way, relayed host call (own Redis)',
  placementSensitive: false,
  inDefaultRun: true,
  async run({ quick, progress }) {
    const suite = 'distributed';
    const figures: Figure[] = [];
    const n = quick ? 200 : 1_000;
    progress('distributed: starting redis-server');
    const redis = await startRedisServer();
    try {
      progress(`distributed: raw BullMQ job round trip, ${n} jobs, 2 worker processes`);
      const raw = await rawRoundTrip(redis.url, n, 2);
      figures.push({
        suite,
        name: 'distributed.raw_job_p50_ms',
        value: round(median(raw)),
        unit: 'ms',
        detail: ms(raw),
      });
      progress(`distributed: pub/sub one way, ${n} messages`);
      const pubsub = await pubsubOneWay(redis.url, n);
      figures.push({
        suite,
        name: 'distributed.pubsub_p50_ms',
        value: round(median(pubsub)),
        unit: 'ms',
        detail: ms(pubsub),
      });
      progress(`distributed: relayed host calls, ${n}`);
      const relay = await relayed(redis.url, n);
      figures.push({
        suite,
        name: 'distributed.relay_p50_ms',
        value: round(median(relay)),
        unit: 'ms',
        baseline: { name: 'pub/sub one way × 2', value: round(2 * median(pubsub)) },
        ratio: round(median(relay) / (2 * median(pubsub))),
        detail: ms(relay),
      });
    } finally {
      await redis.stop();
    }
    return figures;
  },
};
