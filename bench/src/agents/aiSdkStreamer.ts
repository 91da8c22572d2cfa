// The subagent of the AI SDK stream-overhead figure: one model call, streamed,
// through aiSdkModel on @ai-sdk/anthropic, against the bench's stream server
// (its address put in the environment before the pool starts: a worker copies
// the environment when it starts, and builds this model there).
import { createAnthropic } from '@ai-sdk/anthropic';
import { aiSdkModel } from '@troupe/ai-sdk';
import { defineAgent } from '@troupe/core';
import { STREAM_URL_VARIABLE } from './streamer.js';

const anthropic = createAnthropic({
  apiKey: 'sk-ant-bench',
  baseURL: process.env[STREAM_URL_VARIABLE] ?? 'http://127.0.0.1:1/v1',
});

/** Streams the server's burst answer (Anthropic's events, back to back). */
export const aiSdkStreamer = defineAgent({
  name: 'aiSdkStreamer',
  module: import.meta.url,
  instructions: 'Stream.',
  model: aiSdkModel(anthropic('bench'), { maxAttempts: 1, maxOutputTokens: 4096 }),
});
