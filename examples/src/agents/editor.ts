// A parent agent that hands its message to the writer subagent and answers
// with what the writer wrote: the writer's tokens come from a worker thread.
import { defineAgent } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import { lastUserMessage } from './lastUserMessage.js';
import { writer } from './writer.js';

/** Delegates its message to `writer` and answers with the writer's text, word for word. */
export const editor = defineAgent({
  name: 'editor',
  description: 'Has the writer write',
  module: import.meta.url,
  instructions: 'Give the request to the writer.',
  subagents: [writer],
  model: new ScriptedModel(
    [
      ({ messages, lastToolResults }) => {
        if (messages.at(-1)?.role !== 'tool') {
          return {
            toolCalls: [{ name: 'task', arguments: { subagent: 'writer', instructions: lastUserMessage(messages) } }],
          };
        }
        const result = lastToolResults[0];
        return result?.isError ? `failed: ${JSON.stringify(result.content)}` : String(result?.content ?? '');
      },
    ],
    { whenExhausted: 'repeat-last' },
  ),
});
