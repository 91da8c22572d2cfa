// Agents of the tracing tests. Workers import this module by URL.
import { defineAgent, defineTool, type Model, type ModelRequest, ToolResult } from '@troupe/core';
import { ScriptedModel, type ScriptStep } from '@troupe/core/testing';
import { z } from 'zod';

/** A scripted model with a name and provider (what the spans name), optionally streaming its answers. */
function model(steps: readonly ScriptStep[], stream = false): Model {
  const script = new ScriptedModel(steps, { whenExhausted: 'repeat-last' });
  return {
    name: 'script-1',
    provider: 'troupe-test',
    async generate(request: ModelRequest) {
      const response = await script.generate(request);
      if (stream && request.onDelta !== undefined) {
        const text = response.message.content;
        if (text.length > 0) {
          request.onDelta({ type: 'text', text: text.slice(0, 4) });
          request.onDelta({ type: 'text', text: text.slice(4) });
        }
        for (const [index, call] of (response.message.toolCalls ?? []).entries()) {
          request.onDelta({ type: 'tool_call', index, id: call.id, name: call.name });
          request.onDelta({ type: 'tool_call', index, arguments: JSON.stringify(call.arguments) });
        }
      }
      return response;
    },
  };
}

const usage = { inputTokens: 11, outputTokens: 7, cachedInputTokens: 3, reasoningTokens: 2 };

/** One tool call (`work`), then an answer; every model call reports usage. */
export const leaf = defineAgent({
  name: 'leaf',
  module: import.meta.url,
  instructions: 'Work once.',
  tools: [
    defineTool({
      name: 'work',
      description: 'work',
      parameters: z.object({ item: z.string() }),
      execute: ({ item }) => `worked on ${item}`,
    }),
  ],
  model: model([
    { toolCalls: [{ name: 'work', arguments: { item: 'x' } }], usage },
    { text: 'leaf done', usage },
  ]),
});

/** Delegates three tasks to `leaf` in one turn. */
export const fanout = defineAgent({
  name: 'fanout',
  module: import.meta.url,
  instructions: 'Fan out.',
  subagents: [leaf],
  model: model([
    {
      toolCalls: [1, 2, 3].map((i) => ({ name: 'task', arguments: { subagent: 'leaf', instructions: `part ${i}` } })),
      usage,
    },
    { text: 'all done', usage },
  ]),
});

/** A subagent that delegates to `leaf` itself. */
export const middle = defineAgent({
  name: 'middle',
  module: import.meta.url,
  instructions: 'Delegate again.',
  subagents: [leaf],
  model: model([
    { toolCalls: [{ name: 'task', arguments: { subagent: 'leaf', instructions: 'deeper' } }] },
    'middle done',
  ]),
});

/** Parent → middle → leaf. */
export const nested = defineAgent({
  name: 'nested',
  module: import.meta.url,
  instructions: 'Delegate.',
  subagents: [middle],
  model: model([
    { toolCalls: [{ name: 'task', arguments: { subagent: 'middle', instructions: 'go' } }] },
    'nested done',
  ]),
});

/** Polls `ctx.isCancelled()` until its run is cancelled. */
export const poller = defineAgent({
  name: 'poller',
  module: import.meta.url,
  instructions: 'Poll.',
  tools: [
    defineTool({
      name: 'poll',
      description: 'poll until cancelled',
      parameters: z.object({}),
      timeoutMs: null,
      execute: async (_args, ctx) => {
        while (!ctx.isCancelled()) await new Promise<void>((resolve) => setImmediate(resolve));
        ctx.throwIfCancelled();
        return 'unreachable';
      },
    }),
  ],
  model: model([{ toolCalls: [{ name: 'poll' }] }, 'unreachable']),
});

/** Delegates to `poller`. */
export const pollParent = defineAgent({
  name: 'pollParent',
  module: import.meta.url,
  instructions: 'Delegate a poll.',
  subagents: [poller],
  model: model([{ toolCalls: [{ name: 'task', arguments: { subagent: 'poller', instructions: 'poll' } }] }, 'done']),
});

/**
 * `flaky` throws on its first attempt (retried once), `slow` overruns its
 * 30 ms timeout (it waits on its signal, which the timeout aborts).
 */
export const timeouts = defineAgent({
  name: 'timeouts',
  module: import.meta.url,
  instructions: 'Try.',
  tools: [
    defineTool({
      name: 'flaky',
      description: 'fails once',
      parameters: z.object({}),
      retries: 1,
      execute: (_args, ctx) => {
        if (ctx.attempt === 1) throw Object.assign(new Error('first attempt fails'), { code: 'E_FLAKY' });
        return 'second attempt';
      },
    }),
    defineTool({
      name: 'slow',
      description: 'overruns its timeout',
      parameters: z.object({}),
      timeoutMs: 30,
      execute: (_args, ctx) =>
        new Promise((resolve) => ctx.signal.addEventListener('abort', () => resolve('aborted'), { once: true })),
    }),
  ],
  model: model([{ toolCalls: [{ name: 'flaky' }, { name: 'slow' }] }, 'tried']),
});

/** Its tool takes the worker down (`process.exit(3)`). */
export const exiter = defineAgent({
  name: 'exiter',
  module: import.meta.url,
  instructions: 'Exit.',
  tools: [
    defineTool({
      name: 'exit',
      description: 'exit',
      parameters: z.object({}),
      execute: () => {
        process.exit(3);
      },
    }),
  ],
  model: model([{ toolCalls: [{ name: 'exit' }] }, 'survived']),
});

/** Delegates to `exiter` and to `leaf` in one turn. */
export const crashParent = defineAgent({
  name: 'crashParent',
  module: import.meta.url,
  instructions: 'Delegate a crash.',
  subagents: [exiter, leaf],
  model: model([
    {
      toolCalls: [
        { name: 'task', arguments: { subagent: 'exiter', instructions: 'exit' } },
        { name: 'task', arguments: { subagent: 'leaf', instructions: 'work' } },
      ],
    },
    'crash survived',
  ]),
});

/** Asks a person; answers with what they said. */
export const asker = defineAgent({
  name: 'asker',
  module: import.meta.url,
  instructions: 'Ask.',
  tools: [
    defineTool({
      name: 'ask',
      description: 'ask a person',
      parameters: z.object({}),
      execute: (_args, ctx) =>
        ctx.answer === undefined
          ? ToolResult.pending({ kind: 'input', prompt: 'Go ahead?' })
          : `answered ${String(ctx.answer.ok)}`,
    }),
  ],
  model: model([{ toolCalls: [{ name: 'ask' }] }, 'asked']),
});

/** Delegates to `asker`: the child's suspension suspends the parent's message. */
export const askParent = defineAgent({
  name: 'askParent',
  module: import.meta.url,
  instructions: 'Delegate a question.',
  subagents: [asker],
  model: model([{ toolCalls: [{ name: 'task', arguments: { subagent: 'asker', instructions: 'ask' } }] }, 'relayed']),
});

/**
 * Echoes every channel it sees into its tool's result (so the run touches
 * the scope and toolContext values), then answers with a long text; its
 * model streams (what content capture reads).
 */
export const chatty = defineAgent({
  name: 'chatty',
  module: import.meta.url,
  instructions: 'Talk.',
  tools: [
    defineTool({
      name: 'lookup',
      description: 'look things up',
      parameters: z.object({ query: z.string() }),
      execute: ({ query }, ctx) => JSON.stringify({ query, scope: ctx.scope, toolContext: ctx.toolContext }),
    }),
  ],
  model: model(
    [
      { toolCalls: [{ name: 'lookup', arguments: { query: 'what the user asked for, at some length' } }] },
      ({ lastToolResults }) => `the lookup said ${String(lastToolResults[0]?.content)} and then some more words`,
    ],
    true,
  ),
});

/** Delegates to `chatty` (content crosses from a worker). */
export const chattyParent = defineAgent({
  name: 'chattyParent',
  module: import.meta.url,
  instructions: 'Delegate talk.',
  subagents: [chatty],
  model: model(
    [{ toolCalls: [{ name: 'task', arguments: { subagent: 'chatty', instructions: 'talk' } }] }, 'relayed talk'],
    true,
  ),
});
