// Agents of the content-capture bound test (issue 31, item 3). Workers import this module by URL.
import { defineAgent, defineTool, type Model, type ModelRequest } from '@troupe/core';
import { z } from 'zod';

/**
 * Tool-call deltas the flooding model streams, each opening a new index. Three floods stay under
 * the host channel's flood limit (50,000 deltas a second per worker), which would recycle the worker.
 */
export const FLOOD_CALLS = 10_000;
/** Characters of each flooded call's id. */
export const FLOOD_ID_LENGTH = 4096;

/**
 * Streams {@link FLOOD_CALLS} tool-call deltas, each with a new index, a
 * 4 KiB id and some arguments, then holds the call until the run is
 * cancelled: what the supervisor keeps of them is measured while it holds.
 */
const flooding: Model = {
  name: 'flood-1',
  provider: 'troupe-test',
  async generate(request: ModelRequest) {
    const { onDelta, signal } = request;
    if (onDelta === undefined) throw new Error('the flood test turns content capture on: deltas must be asked for');
    for (let index = 0; index < FLOOD_CALLS; index++) {
      const id = `call-${index}-`.padEnd(FLOOD_ID_LENGTH, 'x');
      onDelta({ type: 'tool_call', index, id, name: 'work', arguments: `{"item":"${'y'.repeat(300)}"}` });
    }
    return new Promise((_, reject) => {
      if (signal.aborted) reject(signal.reason);
      signal.addEventListener('abort', () => reject(signal.reason), { once: true });
    });
  },
};

export const flood = defineAgent({
  name: 'flood',
  module: import.meta.url,
  instructions: 'Flood.',
  model: flooding,
  maxTurns: 1,
});

/** The id of the one call {@link longIds} makes: longer than any maxLength the test gives. */
export const LONG_ID = `call-long-${'z'.repeat(FLOOD_ID_LENGTH)}`;

/**
 * One real tool call whose id is 4 KiB and whose arguments stream in two
 * pieces, then an answer: its captured arguments still reach its span.
 */
const longIdModel: Model = {
  name: 'long-1',
  provider: 'troupe-test',
  async generate(request: ModelRequest) {
    const answered = request.messages.some((m) => m.role === 'tool');
    if (answered) {
      request.onDelta?.({ type: 'text', text: 'done' });
      return { message: { role: 'assistant', content: 'done' } };
    }
    const args = { item: 'w'.repeat(500) };
    const json = JSON.stringify(args);
    request.onDelta?.({ type: 'tool_call', index: 0, id: LONG_ID, name: 'work' });
    request.onDelta?.({ type: 'tool_call', index: 0, arguments: json.slice(0, 100) });
    request.onDelta?.({ type: 'tool_call', index: 0, arguments: json.slice(100) });
    return {
      message: { role: 'assistant', content: '', toolCalls: [{ id: LONG_ID, name: 'work', arguments: args }] },
    };
  },
};

export const longIds = defineAgent({
  name: 'longIds',
  module: import.meta.url,
  instructions: 'One call with a long id.',
  tools: [
    defineTool({
      name: 'work',
      description: 'work',
      parameters: z.object({ item: z.string() }),
      execute: ({ item }) => `worked on ${item.length}`,
    }),
  ],
  model: longIdModel,
});
