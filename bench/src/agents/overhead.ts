// Agents of the subagent and supervisor suites. Workers import this module by URL.
import { defineAgent, defineTool, ToolResult } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import { z } from 'zod';

/** One scripted turn, no tools: the smallest possible subagent run. */
export const trivial = defineAgent({
  name: 'trivial',
  module: import.meta.url,
  instructions: 'Answer.',
  model: ScriptedModel.answering('ok'),
});

/** One call of a tool that needs approval: the run opens its host channel. */
export const approver = defineAgent({
  name: 'approver',
  module: import.meta.url,
  instructions: 'Ask, then answer.',
  tools: [
    defineTool({
      name: 'guarded',
      description: 'needs approval',
      parameters: z.object({}),
      requiresApproval: true,
      execute: () => 'ran',
    }),
  ],
  model: new ScriptedModel([{ toolCalls: [{ name: 'guarded' }] }, 'done']),
});

/** A tool that never yields, with a 50 ms timeout: only the watchdog's kill stops it. */
export const spinner = defineAgent({
  name: 'spinner',
  module: import.meta.url,
  instructions: 'Spin.',
  tools: [
    defineTool({
      name: 'spin',
      description: 'never yields',
      parameters: z.object({}),
      timeoutMs: 50,
      execute: () => {
        for (;;) {
          // never yields
        }
      },
    }),
  ],
  model: new ScriptedModel([{ toolCalls: [{ name: 'spin' }] }, 'unreachable']),
});

/** Delegates `count` tasks to `trivial` in one turn (the fan-out). */
export const fanout100 = defineAgent({
  name: 'fanout100',
  module: import.meta.url,
  instructions: 'Fan out.',
  subagents: [trivial],
  model: new ScriptedModel(
    [
      {
        toolCalls: Array.from({ length: 100 }, (_, i) => ({
          name: 'task',
          arguments: { subagent: 'trivial', instructions: `task ${i}` },
        })),
      },
      ({ lastToolResults }) => `${lastToolResults.filter((r) => !r.isError).length} done`,
    ],
    { whenExhausted: 'error' },
  ),
});

/** Delegates one task to `trivial`, then answers: a parent run of the supervisor soak. */
export const delegator = defineAgent({
  name: 'delegator',
  module: import.meta.url,
  instructions: 'Delegate once.',
  subagents: [trivial],
  model: new ScriptedModel([
    { toolCalls: [{ name: 'task', arguments: { subagent: 'trivial', instructions: 'go' } }] },
    'delegated',
  ]),
});

/** Asks a person once and answers with what they said. */
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
        ctx.answer === undefined ? ToolResult.pending({ kind: 'input', prompt: 'ok?' }) : String(ctx.answer.ok),
    }),
  ],
  model: new ScriptedModel([{ toolCalls: [{ name: 'ask' }] }, 'answered']),
});
