// Agents with structured output, for the tests in this folder. A worker
// imports this module by URL to run them as subagents; every model is a
// ScriptedModel whose steps show what the loop asked them and what it told
// them back.
import { defineAgent, OUTPUT_NAME } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import { z } from 'zod';

/** The weather in a city, as data: `unit` defaults to C (so `output` is the schema's result, not the raw JSON). */
export const Weather = z.object({
  city: z.string(),
  tempC: z.number(),
  unit: z.enum(['C', 'F']).default('C'),
});

/** Answers with its structured output when the request asks for one (and says so in text when it does not). */
export const weather = defineAgent({
  name: 'weather',
  description: 'The weather in a city, as data',
  module: import.meta.url,
  instructions: 'Answer with the weather.',
  model: new ScriptedModel(
    [
      ({ output }) =>
        output?.name === OUTPUT_NAME && (output.schema as { type?: unknown }).type === 'object'
          ? { output: { city: 'Oslo', tempC: 4 } }
          : 'the request asked for no output',
    ],
    { whenExhausted: 'repeat-last' },
  ),
  output: Weather,
});

/** Answers with `city` a number, then right: its second answer quotes what it was told in between. */
export const corrected = defineAgent({
  name: 'corrected',
  module: import.meta.url,
  instructions: 'Answer with the weather.',
  model: new ScriptedModel([
    { output: { city: 5, tempC: 4 } },
    ({ messages }) => {
      const told = messages.at(-1);
      return { output: { city: 'Oslo', tempC: 4, told: told?.role === 'user' ? told.content : '(nothing)' } };
    },
  ]),
  output: Weather.extend({ told: z.string().optional() }),
});

/** The shape `stubborn` never manages: a price that is a number. */
export const Order = z.object({ items: z.array(z.object({ name: z.string(), price: z.number() })) });

/** Always answers with the second item's price as text. */
export const stubborn = defineAgent({
  name: 'stubborn',
  module: import.meta.url,
  instructions: 'List the order.',
  model: new ScriptedModel(
    [
      {
        output: {
          items: [
            { name: 'tea', price: 3 },
            { name: 'cake', price: 'free' },
          ],
        },
      },
    ],
    { whenExhausted: 'repeat-last' },
  ),
  output: Order,
});

/**
 * A subagent that delegates to `weather` (its `task` call goes through the
 * supervisor over the host channel) and answers with what it got back,
 * which its model sees as data.
 */
export const forecaster = defineAgent({
  name: 'forecaster',
  description: 'A forecast, from the weather agent',
  module: import.meta.url,
  instructions: 'Ask the weather agent, then give the forecast.',
  subagents: [weather],
  model: new ScriptedModel([
    { toolCalls: [{ name: 'task', arguments: { subagent: 'weather', instructions: 'Oslo?' } }] },
    ({ lastToolResults }) => {
      const seen = lastToolResults[0]?.content as z.output<typeof Weather>;
      return { output: { forecast: `${seen.city}: ${seen.tempC} °${seen.unit}`, from: seen } };
    },
  ]),
  output: z.object({ forecast: z.string(), from: Weather }),
});
