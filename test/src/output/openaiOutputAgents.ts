// A subagent with structured output on openaiModel, for the worker test of
// openaiOutput.test.ts: the worker imports this module and constructs the
// model there, from the server address the test puts in the environment the
// worker inherits.
import { defineAgent } from '@troupe/core';
import { openaiModel } from '@troupe/openai';
import { z } from 'zod';

/** Where the test's chat-completions server listens (set before the pool starts). */
export const OUTPUT_BASE_URL_VARIABLE = 'TROUPE_TEST_OUTPUT_BASE_URL';

/** The city and, when known, a note: optional, so strict mode sends it as nullable. */
export const Place = z.object({ city: z.string(), note: z.string().optional() });

export const placeAgent = defineAgent({
  name: 'openai-place',
  module: import.meta.url,
  instructions: 'Name the city.',
  model: openaiModel({
    model: 'test-model',
    baseURL: process.env[OUTPUT_BASE_URL_VARIABLE] ?? 'http://127.0.0.1:9/v1',
    apiKey: 'sk-worker',
    maxAttempts: 1,
  }),
  output: Place,
});
