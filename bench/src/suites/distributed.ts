import { type ChildProcess, fork, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, rmSync, watch, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { bullmqTransport } from '@troupe/bullmq';
import { startRedisServer } from '@troupe/bullmq/testing';
import { type AgentId, createId, defineAgent, type RunId } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import { sqlitePersistence } from '@troupe/sqlite';
import { createSupervisor, type Supervisor, systemClock } from '@troupe/supervisor';
import { Queue, QueueEvents } from 'bullmq';
import { Redis } from 'ioredis';
import { delegating, spinner, waiter } from '../distributed/agents.js';
import type { Figure, SuiteBody } from '../Suite.js';
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

/** Run `measure` while another process keeps one CPU busy (as a cancelled tool's spin does). */
async function withBusyCore<T>(measure: () => Promise<T>): Promise<T> {
  const busy = spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' });
  try {
    return await measure();
  } finally {
    const exited = once(busy, 'exit');
    busy.kill('SIGKILL');
    await exited;
  }
}

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

/**
 * The cancel's raw baseline (rawCancelPeer): publish here → another process stores into an
 * Atomics slot → its spinning thread sees it, in epoch ms; one sample at a time, so the cancel
 * can take its samples interleaved with these (the same load on the machine for both).
 */
async function rawCanceller(url: string) {
  const channel = 'bench-raw-cancel';
  const peer = await start('rawCancelPeer.js', [url, channel]);
  const pub = new Redis(url);
  const sub = new Redis(url);
  let arrived: ((line: string) => void) | undefined;
  sub.on('message', (_c: string, m: string) => arrived?.(m));
  await sub.subscribe(`${channel}:out`);
  let i = 0;
  return {
    async sample(): Promise<number> {
      const next = () =>
        new Promise<string>((r) => {
          arrived = r;
        });
      const spinning = next();
      await pub.publish(`${channel}:in`, 'arm');
      await spinning;
      const reply = next();
      const t0 = nowMs();
      await pub.publish(`${channel}:in`, String(++i));
      const [, at] = (await reply).split(' ');
      return Number(at) - t0;
    },
    async close(): Promise<void> {
      pub.disconnect();
      sub.disconnect();
      await stop(peer);
    },
  };
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

/** A log file the cluster's tools write, watched (no polling). */
class Log {
  readonly file: string;
  readonly #dir: string;
  readonly #watchers = new Set<ReturnType<typeof watch>>();
  constructor() {
    this.#dir = mkdtempSync(join(tmpdir(), 'troupe-bench-'));
    this.file = join(this.#dir, 'log');
    writeFileSync(this.file, '');
  }
  lines(): string[] {
    if (!existsSync(this.file)) return [];
    return readFileSync(this.file, 'utf8')
      .split('\n')
      .filter((l) => l !== '');
  }
  until(done: (lines: string[]) => boolean): Promise<string[]> {
    return new Promise((resolve) => {
      const check = (): void => {
        const now = this.lines();
        if (!done(now)) return;
        watcher.close();
        this.#watchers.delete(watcher);
        resolve(now);
      };
      const watcher = watch(this.file, check);
      this.#watchers.add(watcher);
      check();
    });
  }
  remove(): void {
    for (const w of this.#watchers) w.close();
    this.#watchers.clear();
    rmSync(this.#dir, { recursive: true, force: true });
  }
}

/** An API host (a supervisor on bullmqTransport) and worker-host processes on one queue. */
async function cluster(
  url: string,
  queue: string,
  hosts: number,
  concurrency: number,
  leaseMs = 1_000,
  store?: string,
  tapLog?: string,
) {
  const children = await Promise.all(
    Array.from({ length: hosts }, (_, i) =>
      start('hostProcess.js', [
        url,
        `bench-${queue}-${i}`,
        queue,
        String(concurrency),
        String(leaseMs),
        ...(tapLog === undefined ? [] : [tapLog]),
      ]),
    ),
  );
  const supervisor: Supervisor = createSupervisor({
    transport: bullmqTransport({ connection: url, build: 'bench', queue, graceMs: 500, leaseCheckMs: 100 }),
    // A lost attempt runs again only from a checkpoint: a store that survives the process.
    ...(store === undefined ? {} : { persistence: sqlitePersistence({ directory: store }) }),
  });
  await supervisor.ready();
  return {
    supervisor,
    children,
    async close() {
      await supervisor.destroy();
      await Promise.all(children.map((c) => (c.connected ? stop(c) : Promise.resolve())));
    },
  };
}

const nowMs = () => performance.timeOrigin + performance.now();

/** What the cross-host cancel took, per sample (ms); with `breakdown`, where. */
interface CancelSamples {
  /** `abort()` on the API host → the busy tool on a worker host sees it. */
  readonly total: number[];
  /** The raw baseline (rawCancelPeer), one sample before each of `total`: the same machine load. */
  readonly raw: number[];
  /** `abort()` → an idle process subscribed to the host's channel gets the cancel (API host + Redis). */
  readonly toTap: number[];
  /** That idle process's arrival → the worker host's event loop reads the same message. */
  readonly tapToHost: number[];
  /** The worker host's loop read it → the tool sees it (its handler, the Atomics store, the thread). */
  readonly hostToSeen: number[];
  /** `abort()` itself: the API host's synchronous path to the publish (ms). */
  readonly sync: number[];
  /** The API host's own event-loop delay while it ran (ms): p99 and max. */
  readonly loop: { readonly p99: number; readonly max: number };
  /** The worker hosts' event-loop delay (breakdown only): the worst p99 and max of the two (ms). */
  readonly hostLoop: { readonly p99: number; readonly max: number };
}

/**
 * Cancel → the busy tool on a worker host sees it (its slot's Atomics load), in epoch ms. With
 * `breakdown`, an idle tap process and a second subscriber on each worker host's loop note when
 * the cancel message arrives there (they add a little work of their own: the total of the plain
 * run is the figure).
 */
async function crossHostCancel(
  url: string,
  n: number,
  progress: (m: string) => void,
  breakdown = false,
): Promise<CancelSamples> {
  const log = new Log();
  const queue = breakdown ? 'cancel-breakdown' : 'cancel';
  const c = await cluster(url, queue, 2, 1, 1_000, undefined, breakdown ? log.file : undefined);
  const tap = breakdown ? await start('cancelTap.js', [url, queue, log.file]) : undefined;
  const raw = breakdown ? undefined : await rawCanceller(url);
  const samples = {
    total: [] as number[],
    raw: [] as number[],
    toTap: [] as number[],
    tapToHost: [] as number[],
    hostToSeen: [] as number[],
    sync: [] as number[],
  };
  const loop = monitorEventLoopDelay({ resolution: 1 });
  const hostLoop = { p99: 0, max: 0 };
  try {
    // Warm: both hosts' threads have loaded the agent.
    for (let i = 0; i < n + 4; i++) {
      if (i % 20 === 0) progress(`distributed: cross-host cancel${breakdown ? ' (breakdown)' : ''} ${i}/${n + 4}`);
      if (i === 4) loop.enable();
      const rawSample = raw === undefined ? undefined : await raw.sample();
      const abort = new AbortController();
      const before = log.lines().length;
      const run = c.supervisor.spawn(spinner, {
        input: 'spin',
        scope: {},
        toolContext: { log: log.file },
        signal: abort.signal,
      });
      run.catch(() => {});
      await log.until((l) => l.length > before && l[l.length - 1]?.startsWith('spinning') === true);
      const from = log.lines().length;
      const t0 = nowMs();
      abort.abort();
      const t1 = nowMs();
      const at = (lines: string[], word: string) =>
        Number(
          lines
            .slice(from)
            .find((x) => x.startsWith(`${word} `))
            ?.split(' ')[1],
        );
      const lines = await log.until((l) => {
        const mine = l.slice(from);
        const has = (word: string) => mine.some((x) => x.startsWith(`${word} `));
        return has('seen') && (!breakdown || (has('tap') && has('hosttap')));
      });
      await run.catch(() => {});
      if (i < 4) continue;
      const seen = at(lines, 'seen');
      samples.total.push(seen - t0);
      if (rawSample !== undefined) samples.raw.push(rawSample);
      samples.sync.push(t1 - t0);
      if (breakdown) {
        samples.toTap.push(at(lines, 'tap') - t0);
        samples.tapToHost.push(at(lines, 'hosttap') - at(lines, 'tap'));
        samples.hostToSeen.push(seen - at(lines, 'hosttap'));
      }
    }
  } finally {
    loop.disable();
    try {
      if (tap !== undefined) await stop(tap);
      await raw?.close();
      await c.close();
    } finally {
      // The hosts noted their loops' delay as they ended.
      for (const line of log.lines().filter((l) => l.startsWith('hostloop '))) {
        const [, p99, max] = line.split(' ').map(Number) as [number, number, number];
        hostLoop.p99 = Math.max(hostLoop.p99, p99);
        hostLoop.max = Math.max(hostLoop.max, max);
      }
      log.remove();
    }
  }
  return { ...samples, loop: { p99: loop.percentile(99) / 1e6, max: loop.max / 1e6 }, hostLoop };
}

/** A subagent run of `work` ms of I/O through a worker host, end to end, as the API host sees it. */
async function viaHost(url: string, n: number, workMs: number): Promise<number[]> {
  const c = await cluster(url, 'overhead', 2, 1);
  const log = new Log();
  const samples: number[] = [];
  try {
    for (let i = 0; i < n + 5; i++) {
      const t0 = performance.now();
      const out = await c.supervisor.spawn(waiter, {
        input: String(workMs),
        scope: {},
        toolContext: { log: log.file },
      });
      if (out.status !== 'done') throw new Error(`a waiter ended ${out.status}`);
      if (i >= 5) samples.push(performance.now() - t0);
    }
  } finally {
    log.remove();
    await c.close();
  }
  return samples;
}

/** The raw baseline of the same work: a BullMQ job whose worker waits `work` ms. */
async function rawWork(url: string, n: number, workMs: number): Promise<number[]> {
  const queue = 'raw-work';
  const children = await Promise.all([
    start('rawWorker.js', [url, queue, '1']),
    start('rawWorker.js', [url, queue, '1']),
  ]);
  const connection = new Redis(url, { maxRetriesPerRequest: null });
  const q = new Queue(queue, { connection, prefix: 'bench' });
  const events = new QueueEvents(queue, {
    connection: new Redis(url, { maxRetriesPerRequest: null }),
    prefix: 'bench',
  });
  await events.waitUntilReady();
  const waiting = new Map<string, () => void>();
  events.on('completed', ({ jobId }) => waiting.get(jobId)?.());
  const samples: number[] = [];
  try {
    for (let i = 0; i < n + 5; i++) {
      const jobId = `w-${i}`;
      const done = new Promise<void>((r) => waiting.set(jobId, r));
      const t0 = performance.now();
      await q.add('raw', { waitMs: workMs }, { jobId, removeOnComplete: true });
      await done;
      if (i >= 5) samples.push(performance.now() - t0);
    }
  } finally {
    await Promise.all([q.close(), events.close()]);
    connection.disconnect();
    (events.opts.connection as unknown as Redis).disconnect();
    await Promise.all(children.map(stop));
  }
  return samples;
}

/** SIGKILL of the host running an attempt → its tool starts again on the other host (ms). */
async function failover(url: string, n: number, leaseMs: number, progress: (m: string) => void): Promise<number[]> {
  const samples: number[] = [];
  for (let i = 0; i < n; i++) {
    progress(`distributed: failover ${i + 1}/${n}`);
    const store = mkdtempSync(join(tmpdir(), 'troupe-bench-store-'));
    const c = await cluster(url, `failover-${i}`, 2, 1, leaseMs, store);
    const log = new Log();
    try {
      // Under a parent agent, whose conversation (and so the subagent's checkpoints) is saved.
      const parent = await c.supervisor.startAgent(delegating, { scope: {}, toolContext: { log: log.file } });
      const run = parent.send('600000');
      const ended = run.then(
        (o) => Promise.reject(new Error(`the run ended ${o.status} instead of going on elsewhere`)),
        (e: unknown) => Promise.reject(e),
      );
      ended.catch(() => {});
      const first = await log.until((l) => l.length >= 1);
      const host = (first[0] as string).split(' ')[1] as string;
      const victim = c.children[Number(host.split('-').pop())] as ChildProcess;
      const t0 = nowMs();
      victim.kill('SIGKILL');
      const lines = await Promise.race([log.until((l) => l.length >= 2), ended]);
      samples.push(Number((lines[1] as string).split(' ')[2]) - t0);
    } finally {
      log.remove();
      await c.close();
      rmSync(store, { recursive: true, force: true });
    }
  }
  return samples;
}

/** Runs per second of an I/O-bound fan-out (`runs` runs of `workMs`) over `hosts` worker-host processes. */
async function fanOut(url: string, hosts: number, runs: number, workMs: number): Promise<number> {
  const c = await cluster(url, `fan-${hosts}`, hosts, 4);
  const log = new Log();
  try {
    // Warm: every host's threads load the agent module.
    await Promise.all(
      Array.from({ length: hosts * 4 }, () =>
        c.supervisor.spawn(waiter, { input: '1', scope: {}, toolContext: { log: log.file } }),
      ),
    );
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: runs }, () =>
        c.supervisor.spawn(waiter, { input: String(workMs), scope: {}, toolContext: { log: log.file } }),
      ),
    );
    return (runs / (performance.now() - t0)) * 1000;
  } finally {
    log.remove();
    await c.close();
  }
}

/** The cross-host cancel's figures (and, with `breakdown`, a second run that says where its time goes). */
async function cancelFigures(
  url: string,
  n: number,
  pubsub: readonly number[],
  progress: (m: string) => void,
  breakdown: boolean,
): Promise<Figure[]> {
  const suite = 'distributed';
  progress('distributed: cross-host cancel');
  const cancel = await crossHostCancel(url, n, progress);
  const rawP50 = median(cancel.raw);
  const rawP99 = quantile(cancel.raw, 0.99);
  const figures: Figure[] = [
    {
      suite,
      name: 'distributed.raw_cancel_p50_ms',
      value: round(rawP50),
      unit: 'ms',
      detail: ms(cancel.raw),
    },
    {
      suite,
      name: 'distributed.cancel_p50_ms',
      value: round(median(cancel.total)),
      unit: 'ms',
      baseline: { name: 'raw cancel, interleaved (p50)', value: round(rawP50) },
      ratio: round(median(cancel.total) / rawP50),
      detail: { ...ms(cancel.total), api_loop_delay_p99_ms: round(cancel.loop.p99) },
    },
    {
      suite,
      name: 'distributed.cancel_p99_ms',
      value: round(quantile(cancel.total, 0.99)),
      unit: 'ms',
      baseline: { name: 'raw cancel, interleaved (p99)', value: round(rawP99) },
      ratio: round(quantile(cancel.total, 0.99) / rawP99),
      detail: {
        ...ms(cancel.total),
        pubsub_one_way_p99_ms: round(quantile(pubsub, 0.99)),
        api_loop_delay_max_ms: round(cancel.loop.max),
      },
    },
  ];
  if (!breakdown) return figures;
  const b = await crossHostCancel(url, n, progress, true);
  const part = (name: string, samples: readonly number[]) => ({
    [`${name}_p50`]: round(median(samples)),
    [`${name}_p99`]: round(quantile(samples, 0.99)),
  });
  figures.push({
    suite,
    name: 'distributed.cancel_breakdown_p99_ms',
    value: round(quantile(b.total, 0.99)),
    unit: 'ms',
    detail: {
      ...part('total', b.total),
      ...part('api_to_tap', b.toTap),
      ...part('tap_to_host_loop', b.tapToHost),
      ...part('host_loop_to_seen', b.hostToSeen),
      ...part('api_sync', b.sync),
      api_loop_delay_p99_ms: round(b.loop.p99),
      api_loop_delay_max_ms: round(b.loop.max),
      host_loop_delay_p99_ms: round(b.hostLoop.p99),
      host_loop_delay_max_ms: round(b.hostLoop.max),
      samples: b.total.length,
    },
  });
  return figures;
}

/**
 * Scale-out (issue 29): what crossing hosts through BullMQ on Redis costs, with
 * its own Redis on 127.0.0.1 and helper processes, against raw BullMQ and raw
 * pub/sub in the same run. Measured here: the raw job round trip (the
 * baseline), pub/sub one way (a cancel's path between hosts), and a relayed
 * host call through bullmqTransport; then, with worker-host processes running
 * attempts on their own threads: a cancel from the API host to the busy tool
 * that sees it (each sample after one of its raw baseline: pub/sub to a process
 * that stores into the Atomics slot a spinning thread reads, no Troupe), a
 * subagent run of 20 ms of I/O against a raw job of the same,
 * failover after a SIGKILL, and an I/O-bound fan-out over 1, 2 and 3 hosts.
 *
 * `pnpm bench distributed --cancel` measures the cancel alone, pinned and unpinned: pub/sub one
 * way, the cancel, and the cancel again with its breakdown (where its time goes).
 */
export const distributedSuite: SuiteBody = {
  async run({ quick, progress, flags }) {
    const suite = 'distributed';
    const figures: Figure[] = [];
    const n = quick ? 200 : 1_000;
    progress('distributed: starting redis-server');
    const redis = await startRedisServer();
    try {
      if (flags.cancel === true) {
        progress(`distributed: pub/sub one way, ${n} messages`);
        const pubsub = await pubsubOneWay(redis.url, n);
        figures.push({
          suite,
          name: 'distributed.pubsub_p50_ms',
          value: round(median(pubsub)),
          unit: 'ms',
          detail: ms(pubsub),
        });
        // The cancel's own conditions: its busy tool holds a core of the machine's two the whole time.
        progress(`distributed: pub/sub one way with a core busy, ${n} messages`);
        const busy = await withBusyCore(() => pubsubOneWay(redis.url, n));
        figures.push({
          suite,
          name: 'distributed.pubsub_busy_core_p99_ms',
          value: round(quantile(busy, 0.99)),
          unit: 'ms',
          detail: ms(busy),
        });
        figures.push(...(await cancelFigures(redis.url, quick ? 40 : 200, pubsub, progress, true)));
        return figures;
      }
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
      figures.push(...(await cancelFigures(redis.url, quick ? 40 : 200, pubsub, progress, false)));
      const workMs = 20;
      progress(`distributed: a subagent of ${workMs} ms of I/O via a worker host, and a raw job of the same`);
      const runs = quick ? 40 : 200;
      const troupe = await viaHost(redis.url, runs, workMs);
      const rawJobs = await rawWork(redis.url, runs, workMs);
      figures.push({
        suite,
        name: 'distributed.overhead_ratio',
        value: round(median(troupe) / median(rawJobs)),
        unit: '×',
        baseline: { name: `raw BullMQ job of ${workMs} ms (p50 ms)`, value: round(median(rawJobs)) },
        ratio: round(median(troupe) / median(rawJobs)),
        detail: { troupe_p50_ms: round(median(troupe)), troupe_p99_ms: round(quantile(troupe, 0.99)), work_ms: workMs },
      });
      const leaseMs = 1_000;
      const fail = await failover(redis.url, quick ? 3 : 8, leaseMs, progress);
      figures.push({
        suite,
        name: 'distributed.failover_p50_ms',
        value: round(median(fail)),
        unit: 'ms',
        baseline: { name: 'host lease', value: leaseMs },
        detail: { ...ms(fail), max: round(Math.max(...fail)) },
      });
      const fan = quick ? 48 : 192;
      const fanWork = 50;
      progress(`distributed: fan-out of ${fan} runs of ${fanWork} ms over 1, 2, 3 hosts (4 threads each)`);
      const t1 = await fanOut(redis.url, 1, fan, fanWork);
      const t2 = await fanOut(redis.url, 2, fan, fanWork);
      const t3 = await fanOut(redis.url, 3, fan, fanWork);
      figures.push({
        suite,
        name: 'distributed.throughput_1_2_3',
        value: round(t3 / t1),
        unit: '× (3 hosts / 1)',
        detail: {
          hosts_1_runs_s: round(t1),
          hosts_2_runs_s: round(t2),
          hosts_3_runs_s: round(t3),
          runs: fan,
          work_ms: fanWork,
        },
      });
    } finally {
      await redis.stop();
    }
    return figures;
  },
};
