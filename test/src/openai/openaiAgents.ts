// Agent modules whose model is an openaiModel, for the worker tests. The
// worker imports this file and constructs the model there: the test passes
// the server's address through the environment the worker inherits.
import { defineAgent, defineTool } from '@troupe/core';
import { openaiModel } from '@troupe/openai';
import { z } from 'zod';

/** Where the test's chat-completions server listens (set before the pool starts). */
export const BASE_URL_VARIABLE = 'TROUPE_TEST_OPENAI_BASE_URL';

const lookup = defineTool({
  name: 'lookup',
  description: 'The temperature in a city',
  parameters: z.object({ city: z.string() }),
  execute: ({ city }) => ({ city, celsius: 21 }),
});

/** Calls tools on an OpenAI-compatible server; one attempt per call. */
export const weatherAgent = defineAgent({
  name: 'openai-weather',
  module: import.meta.url,
  instructions: 'Answer with the temperature.',
  model: openaiModel({
    model: 'test-model',
    baseURL: process.env[BASE_URL_VARIABLE] ?? 'http://127.0.0.1:9/v1',
    apiKey: 'sk-worker',
    maxAttempts: 1,
  }),
  tools: [lookup],
});
