// The subagent of the stream-overhead figure: one model call, streamed, on
// an OpenAI-compatible server whose address the suite puts in the
// environment before the pool starts (a worker copies the environment when
// it starts, and builds this model there).
import { defineAgent } from '@troupe/core';
import { openaiModel } from '@troupe/openai';

/** Where the bench's stream server listens. */
export const STREAM_URL_VARIABLE = 'TROUPE_BENCH_STREAM_URL';

const baseURL = process.env[STREAM_URL_VARIABLE] ?? 'http://127.0.0.1:9/v1';

/** Streams the `burst` answer (the chunks back to back). */
export const burstStreamer = defineAgent({
  name: 'burstStreamer',
  module: import.meta.url,
  instructions: 'Stream.',
  model: openaiModel({ model: 'burst', baseURL, maxAttempts: 1 }),
});

/** Streams the `paced` answer (one chunk per server macrotask). */
export const pacedStreamer = defineAgent({
  name: 'pacedStreamer',
  module: import.meta.url,
  instructions: 'Stream.',
  model: openaiModel({ model: 'paced', baseURL, maxAttempts: 1 }),
});
