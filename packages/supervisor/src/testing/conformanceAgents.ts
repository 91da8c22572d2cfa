// The agents the transport conformance suite dispatches: each tool behaves one way a transport
// has to carry (an answer, a crash, a question, a cooperative or a stubborn cancel, a tool past
// its timeout, a nested task, an approval). Loaded by whatever runs the attempt, by module URL
// (a worker thread here) or by name (a worker host maps `conformanceAgents` to this module).
import { type Agent, defineAgent, defineTool, ToolResult } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import { z } from 'zod';

const callOnce = (name: string, args: unknown = {}) =>
  new ScriptedModel([
    { toolCalls: [{ name, arguments: args }] },
    ({ lastToolResults }) => `${name}: ${JSON.stringify(lastToolResults[0]?.content)}`,
  ]);

/** Answers with its input, after one tool call. */
export const echo = defineAgent({
  name: 'conformance-echo',
  module: import.meta.url,
  instructions: 'Echo.',
  tools: [
    defineTool({
      name: 'echo',
      description: 'echo',
      parameters: z.object({}),
      execute: (_args, ctx) => ({ last: ctx.state.messages.at(-1)?.content ?? null }),
    }),
  ],
  model: callOnce('echo'),
});

/** Its tool ends the thread (a defect the transport must report as a crash). */
export const crasher = defineAgent({
  name: 'conformance-crasher',
  module: import.meta.url,
  instructions: 'Crash.',
  tools: [
    defineTool({
      name: 'exit',
      description: 'exit',
      parameters: z.object({}),
      execute: () => process.exit(7),
    }),
  ],
  model: callOnce('exit'),
});

/** Busy in a tight loop, but polls isCancelled(): a cooperative cancel stops it. */
export const poller = defineAgent({
  name: 'conformance-poller',
  module: import.meta.url,
  instructions: 'Poll.',
  tools: [
    defineTool({
      name: 'poll',
      description: 'poll',
      parameters: z.object({}),
      timeoutMs: null,
      execute: (_args, ctx) => {
        let n = 0;
        while (!ctx.isCancelled()) n++;
        ctx.throwIfCancelled();
        return n;
      },
    }),
  ],
  model: callOnce('poll'),
});

/** Never yields and never checks: only a kill stops it. */
export const stubborn = defineAgent({
  name: 'conformance-stubborn',
  module: import.meta.url,
  instructions: 'Spin.',
  tools: [
    defineTool({
      name: 'spin',
      description: 'spin forever',
      parameters: z.object({}),
      timeoutMs: null,
      execute: () => {
        for (;;) {
          // never yields
        }
      },
    }),
  ],
  model: callOnce('spin'),
});

/** A tool with a 50 ms timeout that never yields: the watchdog kills it (a forced tool timeout). */
export const overrunner = defineAgent({
  name: 'conformance-overrunner',
  module: import.meta.url,
  instructions: 'Overrun.',
  tools: [
    defineTool({
      name: 'overrun',
      description: 'spin past its timeout',
      parameters: z.object({}),
      timeoutMs: 50,
      retries: 0,
      execute: () => {
        for (;;) {
          // never yields
        }
      },
    }),
  ],
  model: callOnce('overrun'),
});

/** Asks a person once; re-run with the answer, returns it. */
export const asker = defineAgent({
  name: 'conformance-asker',
  module: import.meta.url,
  instructions: 'Ask.',
  tools: [
    defineTool({
      name: 'ask',
      description: 'ask a person',
      parameters: z.object({}),
      execute: (_args, ctx) =>
        ctx.answer === undefined
          ? ToolResult.pending({ id: 'conformance-question', kind: 'input', prompt: 'Which one?' })
          : { answered: ctx.answer.data ?? null },
    }),
  ],
  model: callOnce('ask'),
});

/** A tool that needs approval. */
export const approvalSeeker = defineAgent({
  name: 'conformance-approval',
  module: import.meta.url,
  instructions: 'Deploy.',
  tools: [
    defineTool({
      name: 'deploy',
      description: 'deploy',
      parameters: z.object({ env: z.string() }),
      requiresApproval: true,
      execute: ({ env }) => ({ deployed: env }),
    }),
  ],
  model: callOnce('deploy', { env: 'staging' }),
});

/** Reports the time its run has left, as its tool sees it. */
export const clockReader = defineAgent({
  name: 'conformance-clock',
  module: import.meta.url,
  instructions: 'Read the clock.',
  tools: [
    defineTool({
      name: 'timeLeft',
      description: 'the time left',
      parameters: z.object({}),
      execute: (_args, ctx) => ({ timeoutMs: ctx.timeoutMs ?? null }),
    }),
  ],
  model: callOnce('timeLeft'),
});

/** Delegates one task to {@link echo}. */
export const delegator = defineAgent({
  name: 'conformance-delegator',
  module: import.meta.url,
  instructions: 'Delegate.',
  subagents: [echo],
  model: callOnce('task', { subagent: 'conformance-echo', instructions: 'say hi' }),
});

/** Answers with structured output (a schema's result, its default filled in), not only text. */
export const structured = defineAgent({
  name: 'conformance-structured',
  module: import.meta.url,
  instructions: 'Answer as data.',
  model: new ScriptedModel([{ output: { city: 'Oslo', tempC: 4 } }]),
  output: z.object({ city: z.string(), tempC: z.number(), unit: z.enum(['C', 'F']).default('C') }),
});

/**
 * Every agent the transport conformance suite dispatches, for a transport
 * whose hosts load agents by name rather than by module URL: register them
 * on each host the way its own agents are.
 *
 * @example
 * ```ts
 * const byName = new Map(conformanceAgents.map((a) => [a.name, a]))
 * console.log([...byName.keys()].join(', '))
 * ```
 */
export const conformanceAgents: readonly Agent[] = Object.freeze([
  echo,
  crasher,
  poller,
  stubborn,
  overrunner,
  asker,
  approvalSeeker,
  clockReader,
  delegator,
  structured,
]) as readonly Agent[];
