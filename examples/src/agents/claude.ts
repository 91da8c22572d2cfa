// any AI SDK provider as an agent's model (here Anthropic's).
import { createAnthropic } from '@ai-sdk/anthropic';
import { aiSdkModel } from '@troupe/ai-sdk';
import { defineAgent, defineTool } from '@troupe/core';
import { z } from 'zod';

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
  // A model factory: made in the thread that runs the agent, at its first use,
  // so ANTHROPIC_API_KEY is read there and then (and never crosses a thread).
  model: () => aiSdkModel(createAnthropic()('claude-sonnet-4-5'), { maxOutputTokens: 2048 }),
  tools: [lookup],
});
