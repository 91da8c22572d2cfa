// Troupe's side of the peers suite: the same scripted workloads as bench/src/peers/*. Workers
// import this module by URL; the CPU loop is the one every peer's tool runs (peers/burn.ts).
import { defineAgent, defineTool } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import { z } from 'zod';
import { burn, burnChecking } from '../peers/burn.js';

/** The deadline of the never-yielding tool (ms). */
export const NEVER_YIELDS_DEADLINE_MS = 200;

/** What the cancel and deadline tools read from `toolContext`. */
export interface SpinContext {
  /** Iterations of the CPU loop. */
  readonly iterations: number;
  /** Over shared memory: [0] when the tool stopped (epoch ms), [1] 1 if it saw the cancel. */
  readonly stop?: Float64Array;
}

const userText = (messages: readonly { role: string; content?: unknown }[]): string =>
  String(messages.find((m) => m.role === 'user')?.content ?? '');

/** The model asks one call of a trivial tool, then answers with text. */
export const peerTrivial = defineAgent({
  name: 'peerTrivial',
  module: import.meta.url,
  instructions: 'Call echo, then answer.',
  tools: [
    defineTool({
      name: 'echo',
      description: 'echo',
      parameters: z.object({ n: z.number() }),
      execute: ({ n }) => `ok ${n}`,
    }),
  ],
  model: new ScriptedModel([{ toolCalls: [{ name: 'echo', arguments: { n: 1 } }] }, 'done']),
});

/** One call of the CPU tool; its input is the iteration count. */
export const burnOne = defineAgent({
  name: 'burnOne',
  module: import.meta.url,
  instructions: 'Burn.',
  tools: [
    defineTool({
      name: 'burn',
      description: 'burn CPU',
      parameters: z.object({ n: z.number() }),
      execute: ({ n }) => burn(n),
    }),
  ],
  model: new ScriptedModel([
    ({ messages }) => ({ toolCalls: [{ name: 'burn', arguments: { n: Number(userText(messages)) } }] }),
    'done',
  ]),
});

/** A parent whose one turn delegates `calls` tasks to `burnOne` (its input: `<calls> <iterations>`). */
export const burnFanout = defineAgent({
  name: 'burnFanout',
  module: import.meta.url,
  instructions: 'Fan out.',
  subagents: [burnOne],
  model: new ScriptedModel([
    ({ messages }) => {
      const [calls, iterations] = userText(messages).split(' ');
      return {
        toolCalls: Array.from({ length: Number(calls) }, () => ({
          name: 'task',
          arguments: { subagent: 'burnOne', instructions: String(iterations) },
        })),
      };
    },
    ({ lastToolResults }) => `${lastToolResults.filter((r) => !r.isError).length} done`,
  ]),
});

/** One call of a CPU tool that checks `ctx.isCancelled()` between chunks. */
export const checkingSpinner = defineAgent({
  name: 'checkingSpinner',
  module: import.meta.url,
  instructions: 'Spin.',
  tools: [
    defineTool({
      name: 'spin',
      description: 'burn CPU, checking for a cancel',
      parameters: z.object({}),
      timeoutMs: null,
      execute: (_args, ctx) => {
        const { iterations, stop } = ctx.toolContext as unknown as SpinContext;
        const result = burnChecking(iterations, () => ctx.isCancelled());
        if (stop !== undefined) {
          stop[0] = result.stoppedAt;
          stop[1] = result.sawCancel ? 1 : 0;
        }
        return 'stopped';
      },
    }),
  ],
  model: new ScriptedModel([{ toolCalls: [{ name: 'spin' }] }, 'done']),
});

/** One call of a CPU tool that never yields, with a deadline of {@link NEVER_YIELDS_DEADLINE_MS}. */
export const neverYielding = defineAgent({
  name: 'neverYielding',
  module: import.meta.url,
  instructions: 'Spin.',
  tools: [
    defineTool({
      name: 'spin',
      description: 'never yields',
      parameters: z.object({}),
      timeoutMs: NEVER_YIELDS_DEADLINE_MS,
      execute: (_args, ctx) => burn((ctx.toolContext as unknown as SpinContext).iterations),
    }),
  ],
  model: new ScriptedModel([{ toolCalls: [{ name: 'spin' }] }, 'done']),
});
