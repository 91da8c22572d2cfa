// The install test's consumer, with @troupe/openai: an agent whose model is
// an OpenAI-compatible server. The module is imported by the worker that runs
// the agent, so the model is made there; the server's root comes from the
// environment, which workers inherit.
import { defineAgent } from '@troupe/core';
import { openaiModel } from '@troupe/openai';

/** Answers with what the chat-completions server at `TROUPE_CHAT_URL` streams. */
export const chat = defineAgent({
  name: 'chat',
  module: import.meta.url,
  instructions: 'Answer briefly.',
  model: openaiModel({ model: 'consumer-model', baseURL: process.env.TROUPE_CHAT_URL, apiKey: 'consumer-key' }),
});
