// A parent agent whose one turn opens many questions (issue 31, item 2): the answer suite's run.
import { defineAgent, defineTool, type Message, ToolResult } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import { z } from 'zod';

/** Asks question `i`; answered, says what its answer was. */
const ask = defineTool({
  name: 'ask',
  description: 'Ask a person question i',
  parameters: z.object({ i: z.number().int().nonnegative() }),
  execute: ({ i }, ctx) =>
    ctx.answer === undefined
      ? ToolResult.pending({ kind: 'input', prompt: `question ${i}` })
      : `${i}=${String(ctx.answer.data)}`,
});

function countOf(messages: readonly Message[]): number {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (m?.role === 'user') return Number(m.content);
  }
  return 0;
}

/** Send it a number n: its one turn asks n questions; answered, it says how many answers it got. */
export const manyAsker = defineAgent({
  name: 'manyAsker',
  module: import.meta.url,
  instructions: 'Ask many questions at once.',
  tools: [ask],
  model: new ScriptedModel([
    ({ messages }) => ({
      toolCalls: Array.from({ length: countOf(messages) }, (_, i) => ({ name: 'ask', arguments: { i } })),
    }),
    ({ lastToolResults }) => `${lastToolResults.filter((r) => !r.isError).length} answered`,
  ]),
});
