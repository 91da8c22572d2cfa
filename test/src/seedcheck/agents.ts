// Agent modules of the seedcheck tests. Workers import this file by URL.
import { defineAgent, defineTool, type ToolContext, ToolResult } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import { z } from 'zod';

const tokens = (n: number) => ({ inputTokens: n, outputTokens: n });

/**
 * Marks `toolContext.started[0]` (an Int32Array over a SharedArrayBuffer) and
 * waits for its signal: a subagent's call that ends only with a cancel.
 */
const waitForCancel = defineTool({
  name: 'wait',
  description: 'Wait until cancelled',
  parameters: z.object({}),
  timeoutMs: null,
  execute: (_args, ctx: ToolContext<unknown, { started?: unknown }>) => {
    const started = ctx.started;
    if (started instanceof Int32Array) {
      Atomics.store(started, 0, 1);
      Atomics.notify(started, 0);
    }
    return new Promise<string>((resolve) => ctx.signal.addEventListener('abort', () => resolve('stopped')));
  },
});

/** Spends 1000 + 1000 tokens on its first turn, then waits for a cancel. */
export const spender = defineAgent({
  name: 'spender',
  module: import.meta.url,
  instructions: 'Spend, then wait.',
  tools: [waitForCancel],
  model: new ScriptedModel([
    { toolCalls: [{ name: 'wait' }], usage: tokens(1000) },
    { text: 'x', usage: tokens(1000) },
  ]),
});

/** A parent that spends 1 + 1 tokens and delegates to `spender`. */
export const delegator = defineAgent({
  name: 'delegator',
  module: import.meta.url,
  instructions: 'Delegate.',
  subagents: [spender],
  model: new ScriptedModel([
    { toolCalls: [{ name: 'task', arguments: { subagent: 'spender', instructions: 'go' } }], usage: tokens(1) },
    { text: 'done', usage: tokens(1) },
  ]),
});

/** A parent agent whose own tool returns a Date inside its result (cloneable, not JSON). */
export const stamper = defineAgent({
  name: 'stamper',
  module: import.meta.url,
  instructions: 'Tell the time.',
  tools: [
    defineTool({
      name: 'now',
      description: 'The time',
      parameters: z.object({}),
      execute: () => ({ when: new Date(0) }),
    }),
  ],
  model: new ScriptedModel([{ toolCalls: [{ name: 'now' }] }, 'it is time']),
});

/**
 * A tool with `timeoutMs: 50` that computes for 200 ms without yielding, then
 * returns: it overran its deadline (the busy loop creates the condition; nothing waits on it).
 */
export const overrunner = defineAgent({
  name: 'overrunner',
  module: import.meta.url,
  instructions: 'Compute.',
  tools: [
    defineTool({
      name: 'crunch',
      description: 'Compute for 200 ms',
      parameters: z.object({}),
      timeoutMs: 50,
      execute: () => {
        const end = Date.now() + 200;
        while (Date.now() < end) {
          // CPU-bound, never yields
        }
        return 'crunched';
      },
    }),
  ],
  model: new ScriptedModel([
    { toolCalls: [{ name: 'crunch' }] },
    ({ lastToolResults }) => JSON.stringify(lastToolResults[0]?.content),
  ]),
});

/** A parent agent whose tool asks a question whose `data` holds a Date (cloneable, not JSON). */
export const dateAsker = defineAgent({
  name: 'dateAsker',
  module: import.meta.url,
  instructions: 'Ask when.',
  tools: [
    defineTool({
      name: 'schedule',
      description: 'Ask a person to confirm a date',
      parameters: z.object({}),
      execute: (_args, ctx) =>
        ctx.answer === undefined
          ? ToolResult.pending({ kind: 'confirm', prompt: 'Schedule it then?', data: { at: new Date(0) } })
          : `scheduled: ${String(ctx.answer.ok)}`,
    }),
  ],
  model: new ScriptedModel([
    { toolCalls: [{ name: 'schedule' }] },
    ({ lastToolResults }) => JSON.stringify(lastToolResults[0]?.content),
  ]),
});

/** A parent that delegates to `dateAsker`: the same question, asked one level down. */
export const dateAskerLead = defineAgent({
  name: 'dateAskerLead',
  module: import.meta.url,
  instructions: 'Delegate the scheduling.',
  subagents: [dateAsker],
  model: new ScriptedModel([
    { toolCalls: [{ name: 'task', arguments: { subagent: 'dateAsker', instructions: 'schedule it' } }] },
    ({ lastToolResults }) => JSON.stringify(lastToolResults[0]?.content),
  ]),
});

/** Spends 100 + 100 tokens and answers. */
export const quickSpender = defineAgent({
  name: 'quickSpender',
  module: import.meta.url,
  instructions: 'Answer.',
  model: new ScriptedModel([{ text: 'spent', usage: tokens(100) }]),
});

/** Spends 1 + 1 tokens delegating to `quickSpender`, then its model fails. */
export const failingDelegator = defineAgent({
  name: 'failingDelegator',
  module: import.meta.url,
  instructions: 'Delegate, then fail.',
  subagents: [quickSpender],
  model: new ScriptedModel([
    { toolCalls: [{ name: 'task', arguments: { subagent: 'quickSpender', instructions: 'go' } }], usage: tokens(1) },
    () => {
      throw new Error('the model is down');
    },
  ]),
});

/** Every message: 1 + 1 tokens to delegate to `quickSpender` (100 + 100), 1 + 1 to answer. */
export const steadyDelegator = defineAgent({
  name: 'steadyDelegator',
  module: import.meta.url,
  instructions: 'Delegate every message.',
  subagents: [quickSpender],
  model: new ScriptedModel(
    [
      ({ messages }) =>
        messages[messages.length - 1]?.role === 'tool'
          ? { text: 'done', usage: tokens(1) }
          : {
              toolCalls: [{ name: 'task', arguments: { subagent: 'quickSpender', instructions: 'go' } }],
              usage: tokens(1),
            },
    ],
    { whenExhausted: 'repeat-last' },
  ),
});

/** Every message: one answer of 10 + 5 tokens, 4 of the input cached, 2 of the output reasoning. */
export const cachedAnswerer = defineAgent({
  name: 'cachedAnswerer',
  module: import.meta.url,
  instructions: 'Answer.',
  model: new ScriptedModel(
    [{ text: 'ok', usage: { inputTokens: 10, outputTokens: 5, cachedInputTokens: 4, reasoningTokens: 2 } }],
    { whenExhausted: 'repeat-last' },
  ),
});

/** Every run: 100 + 100 tokens to call its tool, which asks a person; once answered, 100 + 100 to answer. */
export const askingSpender = defineAgent({
  name: 'askingSpender',
  module: import.meta.url,
  instructions: 'Ask, then answer.',
  tools: [
    defineTool({
      name: 'ask',
      description: 'Ask a person',
      parameters: z.object({}),
      execute: (_args, ctx) =>
        ctx.answer === undefined ? ToolResult.pending({ kind: 'input', prompt: 'go on?' }) : 'answered',
    }),
  ],
  model: new ScriptedModel(
    [
      ({ messages }) =>
        messages[messages.length - 1]?.role === 'tool'
          ? { text: 'asked and answered', usage: tokens(100) }
          : { toolCalls: [{ name: 'ask' }], usage: tokens(100) },
    ],
    { whenExhausted: 'repeat-last' },
  ),
});

/** Every message: 1 + 1 tokens to delegate to `askingSpender`, 1 + 1 to answer. */
export const askingLead = defineAgent({
  name: 'askingLead',
  module: import.meta.url,
  instructions: 'Delegate every message.',
  subagents: [askingSpender],
  model: new ScriptedModel(
    [
      ({ messages }) =>
        messages[messages.length - 1]?.role === 'tool'
          ? { text: 'done', usage: tokens(1) }
          : {
              toolCalls: [{ name: 'task', arguments: { subagent: 'askingSpender', instructions: 'go' } }],
              usage: tokens(1),
            },
    ],
    { whenExhausted: 'repeat-last' },
  ),
});
