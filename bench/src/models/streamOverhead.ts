// What carrying a model's deltas from a worker to the host costs: the same
// stream of `deltas` text chunks, from a server in its own thread,
//   (a) parsed by the bare SDK on this thread (the baseline),
//   (a') consumed by openaiModel on this thread (the adapter without a thread hop),
//   (b) consumed by a subagent's openaiModel on a worker, with a `model.delta`
//       listener here, until the last delta reached this thread,
//   (b') (b) with a `model.start` listener too, to split (b) at the model call,
//   (c) the run of (b) with no delta listener (nothing streamed), spawn → outcome,
// each trial timed from the call (the spawn) to the last delta, the five interleaved.
import type { ModelDelta, ModelRequest } from '@troupe/core';
import { openaiModel } from '@troupe/openai';
import { createSupervisor } from '@troupe/supervisor';
import OpenAI from 'openai';
import { STREAM_URL_VARIABLE } from '../agents/streamer.js';
import { median } from '../stats.js';
import { startStreamServer } from './streamServer.js';

const now = (): number => performance.now();
/** Epoch ms in the base every thread shares (the paced server stamps its chunks in it). */
const sharedNow = (): number => performance.timeOrigin + performance.now();
const messages: ModelRequest['messages'] = [{ role: 'user', content: 'stream' }];

/** One way of writing the stream (see the server). */
export type Pace = 'burst' | 'paced';

/** Wall times (ms) of each way, and how the worker's deltas crossed. */
export interface StreamSamples {
  readonly sdk: number[];
  readonly inThread: number[];
  readonly worker: number[];
  /** Host messages that carried one worker run's deltas (one per trial). */
  readonly hostMessages: number[];
  /** `paced` only: per trial, the median time from the server writing a delta to its reader seeing it (ms). */
  readonly latency: { readonly sdk: number[]; readonly inThread: number[]; readonly worker: number[] };
  /** (b) again with a `model.start` listener: spawn → the model call starting in the worker (ms). */
  readonly dispatch: number[];
  /** …and the model call starting in the worker → the last delta here (ms). */
  readonly fromModelStart: number[];
  /** Spawn → outcome of (b), and of (c): the same run with no delta listener (nothing streamed). */
  readonly outcome: { readonly streamed: number[]; readonly unstreamed: number[] };
}

/** Records when each stamped delta was seen; `median()` of one trial. */
class Latencies {
  #values: number[] = [];
  see(text: string): void {
    const stamp = Number.parseFloat(text);
    if (Number.isFinite(stamp)) this.#values.push(sharedNow() - stamp);
  }
  take(into: number[]): void {
    if (this.#values.length > 0) into.push(median(this.#values));
    this.#values = [];
  }
}

export interface StreamOverhead {
  readonly deltas: number;
  readonly byPace: ReadonlyMap<Pace, StreamSamples>;
}

/** Run `trials` interleaved rounds for each pace (after `warmup` rounds not kept). */
export async function measureStreamOverhead(options: {
  readonly deltas: number;
  readonly trials: number;
  readonly warmup: number;
  readonly paces: readonly Pace[];
  /** Rounds for a pace other than `trials` (a paced stream takes ~100 ms). */
  readonly trialsOf?: Partial<Record<Pace, number>>;
  readonly progress: (message: string) => void;
}): Promise<StreamOverhead> {
  const { deltas } = options;
  const server = await startStreamServer(deltas);
  const previous = process.env[STREAM_URL_VARIABLE];
  // Before the agent module is evaluated and before the pool's worker starts (it copies the environment).
  process.env[STREAM_URL_VARIABLE] = server.baseURL;
  const supervisor = createSupervisor({ pool: { threads: 1 } });
  try {
    const agents = await import('../agents/streamer.js');
    await supervisor.pool.ready();
    const client = new OpenAI({ apiKey: 'sk-bench', baseURL: server.baseURL, maxRetries: 0, logLevel: 'off' });

    // (b): the host counts deltas and the messages that carried them. Deltas
    // of one host message are emitted in one synchronous loop, and microtasks
    // run between two messages: a new tick with deltas is a new message.
    let received = 0;
    let messagesSeen = 0;
    let inTick = false;
    let lastDelta: (() => void) | undefined;
    const workerLatency = new Latencies();
    const onDeltas = (e: { readonly deltas: readonly ModelDelta[] }): void => {
      for (const d of e.deltas) if (d.type === 'text') workerLatency.see(d.text);
      if (!inTick) {
        inTick = true;
        messagesSeen++;
        queueMicrotask(() => {
          inTick = false;
        });
      }
      received += e.deltas.length;
      if (received >= deltas) lastDelta?.();
    };
    supervisor.on('model.delta', onDeltas);

    const sdkLatency = new Latencies();
    const sdk = async (pace: Pace): Promise<number> => {
      const t0 = now();
      let seen = 0;
      let t1 = Number.NaN;
      const stream = await client.chat.completions.create({
        model: pace,
        messages: [{ role: 'user', content: 'stream' }],
        stream: true,
      });
      for await (const chunk of stream) {
        const content = chunk.choices[0]?.delta?.content;
        if (content) {
          sdkLatency.see(content);
          seen++;
          if (seen === deltas) t1 = now();
        }
      }
      if (seen !== deltas) throw new Error(`the SDK saw ${seen} deltas, not ${deltas}`);
      return t1 - t0;
    };

    const models = {
      burst: openaiModel({ model: 'burst', baseURL: server.baseURL, maxAttempts: 1 }),
      paced: openaiModel({ model: 'paced', baseURL: server.baseURL, maxAttempts: 1 }),
    };
    const inThreadLatency = new Latencies();
    const inThread = async (pace: Pace): Promise<number> => {
      const t0 = now();
      let seen = 0;
      let t1 = Number.NaN;
      await models[pace].generate({
        messages,
        tools: [],
        signal: new AbortController().signal,
        onDelta: (d) => {
          if (d.type === 'text') inThreadLatency.see(d.text);
          seen++;
          if (seen === deltas) t1 = now();
        },
      });
      if (seen !== deltas) throw new Error(`openaiModel saw ${seen} deltas, not ${deltas}`);
      return t1 - t0;
    };

    // `timed`: with a `model.start` listener too, whose `at` (the worker's clock, in the
    // shared epoch base) splits the time into the spawn and the model call.
    const worker = async (
      pace: Pace,
      timed: boolean,
    ): Promise<{
      ms: number;
      messages: number;
      startedAt: number | undefined;
      t0: number;
      t1: number;
      outcomeMs: number;
    }> => {
      received = 0;
      messagesSeen = 0;
      let startedAt: number | undefined;
      const onStart = (e: { readonly at: number }): void => {
        startedAt = e.at;
      };
      if (timed) supervisor.on('model.start', onStart);
      const reached = new Promise<number>((resolve) => {
        lastDelta = () => {
          lastDelta = undefined;
          resolve(sharedNow());
        };
      });
      const t0 = sharedNow();
      const outcome = supervisor.spawn(pace === 'burst' ? agents.burstStreamer : agents.pacedStreamer, {
        input: 'stream',
        scope: {},
      });
      const t1 = await reached;
      const end = await outcome;
      const t2 = sharedNow();
      if (timed) supervisor.off('model.start', onStart);
      if (end.status !== 'done') throw new Error(`the streaming subagent ended ${end.status}`);
      if (received !== deltas) throw new Error(`the host received ${received} deltas, not ${deltas}`);
      return { ms: t1 - t0, messages: messagesSeen, startedAt, t0, t1, outcomeMs: t2 - t0 };
    };

    // (c): the same run with nobody listening to deltas (the model parses the same
    // stream, nothing crosses): spawn → outcome, to compare with (b)'s.
    const unstreamed = async (pace: Pace): Promise<number> => {
      supervisor.off('model.delta', onDeltas);
      try {
        const t0 = sharedNow();
        const end = await supervisor.spawn(pace === 'burst' ? agents.burstStreamer : agents.pacedStreamer, {
          input: 'stream',
          scope: {},
        });
        if (end.status !== 'done') throw new Error(`the subagent ended ${end.status}`);
        return sharedNow() - t0;
      } finally {
        supervisor.on('model.delta', onDeltas);
      }
    };

    const random = seededRandom(0x5eed);
    const byPace = new Map<Pace, StreamSamples>();
    for (const pace of options.paces) {
      const trials = options.trialsOf?.[pace] ?? options.trials;
      const samples: StreamSamples = {
        sdk: [],
        inThread: [],
        worker: [],
        hostMessages: [],
        latency: { sdk: [], inThread: [], worker: [] },
        dispatch: [],
        fromModelStart: [],
        outcome: { streamed: [], unstreamed: [] },
      };
      options.progress(
        `models: a ${deltas}-delta ${pace} stream, bare SDK / openaiModel here / a subagent in a worker, ${trials} rounds`,
      );
      for (let round = 0; round < options.warmup + trials; round++) {
        const keep = round >= options.warmup;
        // A fresh order each round: no variant always runs first, or after the same one.
        const order = shuffled([0, 1, 2, 3, 4], random);
        for (const which of order) {
          if (which === 0) {
            const ms = await sdk(pace);
            if (keep) samples.sdk.push(ms);
            sdkLatency.take(keep ? samples.latency.sdk : []);
          } else if (which === 1) {
            const ms = await inThread(pace);
            if (keep) samples.inThread.push(ms);
            inThreadLatency.take(keep ? samples.latency.inThread : []);
          } else if (which === 2) {
            const r = await worker(pace, false);
            if (keep) {
              samples.worker.push(r.ms);
              samples.hostMessages.push(r.messages);
              samples.outcome.streamed.push(r.outcomeMs);
            }
            workerLatency.take(keep ? samples.latency.worker : []);
          } else if (which === 4) {
            const ms = await unstreamed(pace);
            if (keep) samples.outcome.unstreamed.push(ms);
          } else {
            const r = await worker(pace, true);
            workerLatency.take([]);
            if (keep && r.startedAt !== undefined) {
              samples.dispatch.push(r.startedAt - r.t0);
              samples.fromModelStart.push(r.t1 - r.startedAt);
            }
          }
        }
      }
      byPace.set(pace, samples);
    }
    return { deltas, byPace };
  } finally {
    await supervisor.destroy();
    await server.close();
    if (previous === undefined) delete process.env[STREAM_URL_VARIABLE];
    else process.env[STREAM_URL_VARIABLE] = previous;
  }
}

/** (b − a) / a of the medians. */
export function overheadRatio(samples: StreamSamples, baseline: 'sdk' | 'inThread' = 'sdk'): number {
  const a = median(samples[baseline]);
  return (median(samples.worker) - a) / a;
}

/** A small deterministic PRNG (mulberry32): the same orders on every run. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A Fisher–Yates shuffle of a copy. */
export function shuffled<T>(items: readonly T[], random: () => number): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}
