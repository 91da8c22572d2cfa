// What running an AI SDK provider's stream through Troupe costs: the same
// `deltas`-delta stream (Anthropic's Messages API events, from a server in a
// thread of its own), read to its last delta
//   (a) by the AI SDK model alone: @ai-sdk/anthropic's `doStream` on this thread (the baseline),
//   (a') by aiSdkModel on this thread (the adapter without a thread hop),
//   (b) by a subagent's aiSdkModel on a worker, with a `model.delta` listener
//       here, until the last delta reached this thread,
// each trial timed from the call (the spawn) to the last delta, interleaved in a fresh order each round.
import { createAnthropic } from '@ai-sdk/anthropic';
import type { LanguageModelV4StreamPart } from '@ai-sdk/provider';
import { aiSdkModel } from '@troupe/ai-sdk';
import type { ModelDelta } from '@troupe/core';
import { createSupervisor } from '@troupe/supervisor';
import { STREAM_URL_VARIABLE } from '../agents/streamer.js';
import { seededRandom, shuffled } from './streamOverhead.js';
import { startStreamServer } from './streamServer.js';

const now = (): number => performance.now();
const sharedNow = (): number => performance.timeOrigin + performance.now();

export interface AiSdkStreamSamples {
  readonly sdk: number[];
  readonly inThread: number[];
  readonly worker: number[];
}

export async function measureAiSdkStreamOverhead(options: {
  readonly deltas: number;
  readonly trials: number;
  readonly warmup: number;
  readonly progress: (message: string) => void;
}): Promise<AiSdkStreamSamples> {
  const { deltas } = options;
  const server = await startStreamServer(deltas);
  const previous = process.env[STREAM_URL_VARIABLE];
  process.env[STREAM_URL_VARIABLE] = server.baseURL;
  const supervisor = createSupervisor({ pool: { threads: 1 } });
  try {
    const { aiSdkStreamer } = await import('../agents/aiSdkStreamer.js');
    await supervisor.pool.ready();
    const language = createAnthropic({ apiKey: 'sk-ant-bench', baseURL: server.baseURL })('bench');
    const prompt = [{ role: 'user' as const, content: [{ type: 'text' as const, text: 'stream' }] }];

    const sdk = async (): Promise<number> => {
      const t0 = now();
      let seen = 0;
      let t1 = Number.NaN;
      const { stream } = await language.doStream({ prompt, maxOutputTokens: 4096 });
      const reader = stream.getReader();
      for (;;) {
        const { done, value }: { done: boolean; value?: LanguageModelV4StreamPart | undefined } = await reader.read();
        if (done) break;
        if (value?.type === 'text-delta' && ++seen === deltas) t1 = now();
      }
      if (seen !== deltas) throw new Error(`doStream saw ${seen} deltas, not ${deltas}`);
      return t1 - t0;
    };

    const model = aiSdkModel(language, { maxAttempts: 1, maxOutputTokens: 4096 });
    const inThread = async (): Promise<number> => {
      const t0 = now();
      let seen = 0;
      let t1 = Number.NaN;
      await model.generate({
        messages: [{ role: 'user', content: 'stream' }],
        tools: [],
        signal: new AbortController().signal,
        onDelta: () => {
          if (++seen === deltas) t1 = now();
        },
      });
      if (seen !== deltas) throw new Error(`aiSdkModel saw ${seen} deltas, not ${deltas}`);
      return t1 - t0;
    };

    let received = 0;
    let lastDelta: (() => void) | undefined;
    supervisor.on('model.delta', (e: { readonly deltas: readonly ModelDelta[] }) => {
      received += e.deltas.length;
      if (received >= deltas) lastDelta?.();
    });
    const worker = async (): Promise<number> => {
      received = 0;
      const reached = new Promise<number>((resolve) => {
        lastDelta = () => {
          lastDelta = undefined;
          resolve(sharedNow());
        };
      });
      const t0 = sharedNow();
      const outcome = supervisor.spawn(aiSdkStreamer, { input: 'stream', scope: {} });
      const t1 = await reached;
      const end = await outcome;
      if (end.status !== 'done') throw new Error(`the streaming subagent ended ${end.status}`);
      return t1 - t0;
    };

    const samples: AiSdkStreamSamples = { sdk: [], inThread: [], worker: [] };
    options.progress(
      `models: a ${deltas}-delta Anthropic stream, the AI SDK model alone / aiSdkModel here / a subagent in a worker, ${options.trials} rounds`,
    );
    const random = seededRandom(0x5eed);
    for (let round = 0; round < options.warmup + options.trials; round++) {
      const keep = round >= options.warmup;
      const order = shuffled([0, 1, 2], random);
      for (const which of order) {
        const ms = which === 0 ? await sdk() : which === 1 ? await inThread() : await worker();
        if (keep) (which === 0 ? samples.sdk : which === 1 ? samples.inThread : samples.worker).push(ms);
      }
    }
    return samples;
  } finally {
    await supervisor.close({ timeoutMs: 5_000 });
    if (previous === undefined) delete process.env[STREAM_URL_VARIABLE];
    else process.env[STREAM_URL_VARIABLE] = previous;
    await server.close();
  }
}
