// any AI SDK provider as an agent's model (here Anthropic's).
import { createAnthropic } from '@ai-sdk/anthropic';
import { aiSdkModel } from '@troupe/ai-sdk';
import { defineAgent, defineTool } from '@troupe/core';
import { z } from 'zod';

// Built in the worker that runs the agent: ANTHROPIC_API_KEY is read there.
const anthropic = createAnthropic();

const lookup = defineTool({
  name: 'lookup',
  description: 'The temperature in a city',
  parameters: z.object({ city: z.string() }),
  execute: ({ city }) => ({ city, celsius: 21 }),
});

export const claude = defineAgent({
  name: 'claude',
  module: import.meta.url,
  instructions: 'Answer with the temperature.',
  model: aiSdkModel(anthropic('claude-sonnet-4-5'), { maxOutputTokens: 2048 }),
  tools: [lookup],
});
