// `pnpm bench models`: how fast a model call stops when its run is cancelled,
// in every phase, against the bare SDK backing off on its own (for
// `@troupe/openai`, and for `@troupe/ai-sdk` on the AI SDK's Anthropic
// provider); whether a stalled stream ever hangs a call; and what carrying a
// stream's deltas from a worker to the host adds over parsing it in one
// thread (both packages).
import { createAnthropic } from '@ai-sdk/anthropic';
import { aiSdkModel } from '@troupe/ai-sdk';
import {
  CancelledError,
  type Clock,
  isTroupeError,
  type Model,
  type ModelRequest,
  type TimerHandle,
} from '@troupe/core';
import { openaiModel } from '@troupe/openai';
import OpenAI from 'openai';
import { measureAiSdkStreamOverhead } from '../models/aiSdkStreamOverhead.js';
import { type PhaseServers, startPhaseServers } from '../models/phaseServers.js';
import { measureStreamOverhead, overheadRatio } from '../models/streamOverhead.js';
import type { Figure, SuiteBody, SuiteContext } from '../Suite.js';
import { median, quantile, round } from '../stats.js';

const now = (): number => performance.now();
const messages: ModelRequest['messages'] = [{ role: 'user', content: 'hi' }];
type Phase = 'connect' | 'headers' | 'backoff' | 'stream';
const PHASES: readonly Phase[] = ['connect', 'headers', 'backoff', 'stream'];
const DOING: Record<Phase, string> = {
  connect: 'connecting (a TLS handshake that never completes)',
  headers: 'waiting for headers',
  backoff: 'backing off (retry-after 2 s)',
  stream: 'streaming (after the first token)',
};
/** The `retry-after` the phase server sends, in ms. */
const RETRY_AFTER_MS = 2_000;

/** Real timers that report when a timer of `ms` is set (the backoff sleep starting). */
function watchingClock(onTimer: (ms: number) => void): Clock {
  return {
    now: () => performance.timeOrigin + performance.now(),
    setTimeout(callback: () => void, ms: number): TimerHandle {
      const handle = setTimeout(callback, ms);
      onTimer(ms);
      return handle;
    },
    clearTimeout: (handle: TimerHandle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
  };
}

/** Which package's model a call goes through: `@troupe/openai`, or `@troupe/ai-sdk` on `@ai-sdk/anthropic`. */
type Adapter = 'openai' | 'aisdk';

function makeModel(adapter: Adapter, baseURL: string, clock: Clock): Model {
  return adapter === 'openai'
    ? openaiModel({ model: 'bench', baseURL, clock })
    : aiSdkModel(createAnthropic({ apiKey: 'sk-ant-bench', baseURL })('bench'), { clock, maxOutputTokens: 1024 });
}

/** abort() → the call's rejection, in ms, for `trials` calls held in `phase`. */
async function abortLatency(
  servers: PhaseServers,
  phase: Phase,
  trials: number,
  adapter: Adapter = 'openai',
): Promise<number[]> {
  const samples: number[] = [];
  for (let i = 0; i < trials; i++) {
    let reached: () => void = () => {};
    const inPhase = new Promise<void>((resolve) => {
      reached = resolve;
    });
    servers.onConnection = phase === 'connect' ? reached : undefined;
    servers.onRequest = phase === 'headers' ? reached : undefined;
    servers.mode = phase === 'backoff' ? 'retry' : phase === 'stream' ? 'stall' : 'hang';
    const model = makeModel(
      adapter,
      phase === 'connect' ? servers.tlsStallURL : servers.baseURL,
      watchingClock((ms) => {
        if (phase === 'backoff' && ms === RETRY_AFTER_MS) reached();
      }),
    );
    const controller = new AbortController();
    let rejectedAt = 0;
    const call = model
      .generate({ messages, tools: [], signal: controller.signal, onDelta: phase === 'stream' ? reached : undefined })
      .then(
        () => new Error(`${phase}: the call succeeded`),
        (error: unknown) => {
          rejectedAt = now();
          return error;
        },
      );
    await inPhase;
    const abortedAt = now();
    controller.abort(new CancelledError('user'));
    const error = await call;
    if (!(error instanceof CancelledError))
      throw new Error(`${phase}: expected a CancelledError, got ${String(error)}`);
    samples.push(rejectedAt - abortedAt);
  }
  return samples;
}

/** The same abort during a backoff, with the bare SDK doing its own retries (the baseline). */
async function bareSdkBackoff(servers: PhaseServers, trials: number): Promise<number[]> {
  const client = new OpenAI({ apiKey: 'sk-bench', baseURL: servers.baseURL, maxRetries: 2, logLevel: 'off' });
  servers.mode = 'retry';
  servers.onConnection = undefined;
  servers.onRequest = undefined;
  const samples: number[] = [];
  try {
    for (let i = 0; i < trials; i++) {
      const answered = new Promise<void>((resolve) => {
        servers.onAnswered = resolve;
      });
      const controller = new AbortController();
      let rejectedAt = 0;
      const call = client.chat.completions
        .create({ model: 'bench', messages: [{ role: 'user', content: 'hi' }] }, { signal: controller.signal })
        .then(
          () => undefined,
          () => {
            rejectedAt = now();
          },
        );
      await answered;
      // Let the SDK read the 503 and enter its sleep (a benchmark may wait; a test may not).
      await new Promise((resolve) => setTimeout(resolve, 20));
      const abortedAt = now();
      controller.abort();
      await call;
      samples.push(rejectedAt - abortedAt);
    }
  } finally {
    servers.onAnswered = undefined;
  }
  return samples;
}

/**
 * `calls` streams at once that each send one chunk and stall: how long past
 * the idle timeout (counted from the last delta) each call took to fail, and
 * how many did not fail with ERR_MODEL_STREAM_IDLE within the timeout + 100 ms.
 */
async function stall(
  servers: PhaseServers,
  calls: number,
  rounds: number,
  idleMs: number,
): Promise<{ overruns: number[]; hung: number }> {
  servers.mode = 'stall';
  servers.onConnection = undefined;
  servers.onRequest = undefined;
  const model = openaiModel({ model: 'bench', baseURL: servers.baseURL, streamIdleTimeoutMs: idleMs });
  const overruns: number[] = [];
  let hung = 0;
  for (let r = 0; r < rounds; r++) {
    const results = await Promise.all(
      Array.from({ length: calls }, async () => {
        let lastDelta = Number.NaN;
        try {
          await model.generate({
            messages,
            tools: [],
            signal: new AbortController().signal,
            onDelta: () => {
              lastDelta = now();
            },
          });
          return { overrun: Number.POSITIVE_INFINITY, idle: false };
        } catch (error) {
          return { overrun: now() - lastDelta - idleMs, idle: isTroupeError(error, 'ERR_MODEL_STREAM_IDLE') };
        }
      }),
    );
    for (const { overrun, idle } of results) {
      overruns.push(overrun);
      if (!idle || !(overrun <= 100)) hung++;
    }
  }
  return { overruns, hung };
}

function summary(samples: readonly number[]): Record<string, number> {
  return {
    median_ms: round(median(samples)),
    p95_ms: round(quantile(samples, 0.95)),
    max_ms: round(Math.max(...samples)),
    samples: samples.length,
  };
}

async function measure(ctx: SuiteContext): Promise<Figure[]> {
  const servers = await startPhaseServers();
  try {
    const trials = ctx.quick ? 5 : 30;
    const byPhase = new Map<Phase, number[]>();
    for (const phase of PHASES) {
      ctx.progress(`models: abort while ${DOING[phase]}, ${trials} calls`);
      byPhase.set(phase, await abortLatency(servers, phase, trials));
    }
    const aisdkByPhase = new Map<Phase, number[]>();
    for (const phase of PHASES) {
      ctx.progress(`models: aiSdkModel (@ai-sdk/anthropic): abort while ${DOING[phase]}, ${trials} calls`);
      aisdkByPhase.set(phase, await abortLatency(servers, phase, trials, 'aisdk'));
    }
    const baselineTrials = ctx.quick ? 2 : 5;
    ctx.progress(`models: the bare SDK aborted during its own backoff, ${baselineTrials} calls (~2 s each)`);
    const bare = await bareSdkBackoff(servers, baselineTrials);
    const idleMs = 200;
    const calls = ctx.quick ? 10 : 50;
    const rounds = ctx.quick ? 1 : 3;
    ctx.progress(`models: ${calls} stalled streams at once x ${rounds}, idle timeout ${idleMs} ms`);
    const stalled = await stall(servers, calls, rounds, idleMs);

    const worst = PHASES.map((p) => [p, Math.max(...(byPhase.get(p) ?? []))] as const).sort((a, b) => b[1] - a[1])[0];
    const aisdkWorst = PHASES.map((p) => [p, Math.max(...(aisdkByPhase.get(p) ?? []))] as const).sort(
      (a, b) => b[1] - a[1],
    )[0];
    const figures: Figure[] = [
      {
        suite: 'models',
        name: 'models.abort_ms_max',
        value: round(worst?.[1] ?? Number.NaN),
        unit: 'ms',
        baseline: { name: 'the bare SDK aborted during its own backoff (ms, median)', value: round(median(bare)) },
        ratio: round((worst?.[1] ?? Number.NaN) / median(bare)),
        detail: { worst_phase: worst?.[0] ?? '', bare_sdk_max_ms: round(Math.max(...bare)), bare_samples: bare.length },
      },
      ...PHASES.map(
        (phase): Figure => ({
          suite: 'models',
          name: `models.abort_ms.${phase}`,
          value: round(median(byPhase.get(phase) ?? [])),
          unit: 'ms',
          detail: summary(byPhase.get(phase) ?? []),
        }),
      ),
      {
        suite: 'models',
        name: 'models.aisdk_abort_ms_max',
        value: round(aisdkWorst?.[1] ?? Number.NaN),
        unit: 'ms',
        baseline: { name: 'the bare SDK aborted during its own backoff (ms, median)', value: round(median(bare)) },
        ratio: round((aisdkWorst?.[1] ?? Number.NaN) / median(bare)),
        detail: {
          worst_phase: aisdkWorst?.[0] ?? '',
          provider: '@ai-sdk/anthropic',
          ...Object.fromEntries(
            PHASES.map((p) => [`${p}_median_ms`, round(median(aisdkByPhase.get(p) ?? []))] as const),
          ),
          ...Object.fromEntries(
            PHASES.map((p) => [`${p}_max_ms`, round(Math.max(...(aisdkByPhase.get(p) ?? [])))] as const),
          ),
          samples_per_phase: trials,
        },
      },
      {
        suite: 'models',
        name: 'models.stall_overrun_ms',
        value: round(Math.max(...stalled.overruns)),
        unit: 'ms',
        detail: {
          hung_calls: stalled.hung,
          calls: stalled.overruns.length,
          idle_timeout_ms: idleMs,
          median_ms: round(median(stalled.overruns)),
          p95_ms: round(quantile(stalled.overruns, 0.95)),
        },
      },
    ];
    return figures;
  } finally {
    await servers.close();
  }
}

/**
 * `models.stream_overhead_ratio`: a 1,000-delta stream from a worker to the
 * host against the bare SDK parsing it on this thread, (b − a) / a of the
 * medians; the `paced` variant writes the stream 10 chunks per millisecond.
 */
async function streaming(ctx: SuiteContext): Promise<Figure[]> {
  const deltas = 1_000;
  const measured = await measureStreamOverhead({
    deltas,
    trials: ctx.quick ? 30 : 120,
    warmup: ctx.quick ? 3 : 5,
    paces: ['burst', 'paced'],
    trialsOf: { paced: ctx.quick ? 3 : 10 },
    progress: (m) => ctx.progress(m),
  });
  const figures: Figure[] = [];
  for (const [pace, s] of measured.byPace) {
    const a = median(s.sdk);
    const b = median(s.worker);
    const paired = s.worker.map((w, i) => (w - (s.sdk[i] ?? Number.NaN)) / (s.sdk[i] ?? Number.NaN));
    figures.push({
      suite: 'models',
      name: pace === 'burst' ? 'models.stream_overhead_ratio' : 'models.stream_overhead_ratio.paced',
      value: round((b - a) / a),
      unit: '(b-a)/a',
      baseline: {
        name: `the bare SDK parsing the same ${deltas}-delta ${pace} stream on this thread (ms, median)`,
        value: round(a),
      },
      ratio: round(b / a),
      detail: {
        worker_to_host_ms: round(b),
        bare_sdk_ms: round(a),
        openai_model_here_ms: round(median(s.inThread)),
        ratio_vs_openai_model_here: round(overheadRatio(s, 'inThread')),
        paired_ratio_median: round(median(paired)),
        // The quieter quarter of the samples: less of what else the machine was doing.
        ratio_p25: round((quantile(s.worker, 0.25) - quantile(s.sdk, 0.25)) / quantile(s.sdk, 0.25)),
        worker_to_host_ms_p25: round(quantile(s.worker, 0.25)),
        bare_sdk_ms_p25: round(quantile(s.sdk, 0.25)),
        // (b) split at the model call's start in the worker (a run with a model.start listener too).
        spawn_to_model_call_ms: round(median(s.dispatch)),
        model_call_to_last_delta_ms: round(median(s.fromModelStart)),
        ratio_from_model_call: round((median(s.fromModelStart) - a) / a),
        // What streaming itself adds to a run: spawn → outcome with the delta listener, and without.
        outcome_ms_streamed: round(median(s.outcome.streamed)),
        outcome_ms_not_streamed: round(median(s.outcome.unstreamed)),
        host_messages: round(median(s.hostMessages)),
        host_messages_max: Math.max(...s.hostMessages),
        deltas,
        samples: s.worker.length,
        ...(pace === 'paced'
          ? {
              delta_latency_ms_worker: round(median(s.latency.worker)),
              delta_latency_ms_openai_model_here: round(median(s.latency.inThread)),
              delta_latency_ms_bare_sdk: round(median(s.latency.sdk)),
            }
          : {}),
      },
    });
  }
  return figures;
}

/**
 * `models.aisdk_stream_overhead_ratio`: a 1,000-delta Anthropic stream read
 * through a Troupe subagent (aiSdkModel on a worker, deltas carried to the
 * host) against the AI SDK's provider model alone on this thread
 * (`doStream`), b / a of the medians (target ≤ 1.1).
 */
async function aiSdkStreaming(ctx: SuiteContext): Promise<Figure[]> {
  const deltas = 1_000;
  const s = await measureAiSdkStreamOverhead({
    deltas,
    trials: ctx.quick ? 30 : 120,
    warmup: ctx.quick ? 3 : 5,
    progress: (m) => ctx.progress(m),
  });
  const a = median(s.sdk);
  const b = median(s.worker);
  const paired = s.worker.map((w, i) => w / (s.sdk[i] ?? Number.NaN));
  return [
    {
      suite: 'models',
      name: 'models.aisdk_stream_overhead_ratio',
      value: round(b / a),
      unit: 'b/a',
      baseline: {
        name: `@ai-sdk/anthropic's doStream alone reading the same ${deltas}-delta stream on this thread (ms, median)`,
        value: round(a),
      },
      ratio: round(b / a),
      detail: {
        worker_to_host_ms: round(b),
        provider_alone_ms: round(a),
        aisdk_model_here_ms: round(median(s.inThread)),
        ratio_vs_aisdk_model_here: round(b / median(s.inThread)),
        adapter_here_ratio: round(median(s.inThread) / a),
        paired_ratio_median: round(median(paired)),
        ratio_p25: round(quantile(s.worker, 0.25) / quantile(s.sdk, 0.25)),
        deltas,
        samples: s.worker.length,
      },
    },
  ];
}

export const modelsSuite: SuiteBody = {
  run: async (ctx) => [...(await measure(ctx)), ...(await streaming(ctx)), ...(await aiSdkStreaming(ctx))],
};
