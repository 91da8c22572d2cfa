// Agents whose model is a real provider package, @ai-sdk/anthropic, behind
// aiSdkModel: the worker that runs one imports this file and builds the
// provider and the model there. The test's server address comes through the
// environment, which workers copy when they start.
import { threadId } from 'node:worker_threads';
import { createAnthropic } from '@ai-sdk/anthropic';
import { aiSdkModel } from '@troupe/ai-sdk';
import { defineAgent, defineTool } from '@troupe/core';
import { z } from 'zod';

/** Where the test's Anthropic-speaking server listens (its `/v1` root), set before the pool starts. */
export const BASE_URL_VARIABLE = 'TROUPE_TEST_ANTHROPIC_URL';

const anthropic = createAnthropic({
  apiKey: 'sk-ant-worker',
  baseURL: process.env[BASE_URL_VARIABLE] ?? 'http://127.0.0.1:1/v1',
});

const lookup = defineTool({
  name: 'lookup',
  description: 'The temperature in a city',
  parameters: z.object({ city: z.string() }),
  // Which thread ran it: the model's tool calls run where the agent runs.
  execute: ({ city }) => ({ city, celsius: 21, threadId }),
});

/** Claude (as the test's server plays it), one attempt per call, with a tool. */
export const claudeAgent = defineAgent({
  name: 'aisdk-claude',
  module: import.meta.url,
  instructions: 'Answer with the temperature.',
  model: aiSdkModel(anthropic('claude-test'), { maxAttempts: 1, maxOutputTokens: 1024 }),
  tools: [lookup],
});

/** A forecast, as an agent's structured output. */
export const Forecast = z.object({ city: z.string(), tempC: z.number() });

/**
 * Claude Sonnet 4.5 (as the test's server plays it) asked for a `Forecast`,
 * its model made by a model factory in the worker that runs it, from the
 * environment as it is then.
 */
export const forecaster = defineAgent({
  name: 'aisdk-forecaster',
  module: import.meta.url,
  instructions: 'Forecast the weather of the city you are given.',
  model: () =>
    aiSdkModel(
      createAnthropic({ apiKey: 'sk-ant-worker', baseURL: process.env[BASE_URL_VARIABLE] ?? 'http://127.0.0.1:1/v1' })(
        'claude-sonnet-4-5',
      ),
      { maxAttempts: 1, maxOutputTokens: 1024 },
    ),
  output: Forecast,
});
