/// <reference lib="es2024.sharedmemory" />
// Agents of the run-tree figures (supervisor suite): a question asked while
// siblings run, and a three-level tree cancelled at its root. Workers import
// this module by URL.
import { performance } from 'node:perf_hooks';
import { defineAgent, defineTool, ToolResult } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import { z } from 'zod';

const epochNow = (): number => performance.timeOrigin + performance.now();

/**
 * A sibling of the question figure: told `ask`, its tool asks a person at
 * once (the request carries when, in epoch ms, so the host can time its
 * arrival); told `hold`, its tool waits until the host opens the gate
 * (`toolContext.gate`, an Int32Array over shared memory, word 0 set to 1).
 */
export const sibling = defineAgent({
  name: 'sibling',
  module: import.meta.url,
  instructions: 'Ask or hold, as told.',
  tools: [
    defineTool({
      name: 'act',
      description: 'ask a person, or hold until the gate opens',
      parameters: z.object({}),
      timeoutMs: null,
      execute: async (_args, ctx) => {
        const told = ctx.state.messages.find((m) => m.role === 'user')?.content;
        if (told === 'ask') {
          if (ctx.answer !== undefined) return 'answered';
          return ToolResult.pending({ kind: 'input', prompt: 'go on?', data: { at: epochNow() } });
        }
        const gate = ctx.toolContext.gate as Int32Array;
        while (Atomics.load(gate, 0) === 0 && !ctx.isCancelled()) {
          await Atomics.waitAsync(gate, 0, 0, 50).value;
        }
        return 'held';
      },
    }),
  ],
  model: new ScriptedModel([
    { toolCalls: [{ name: 'act' }] },
    ({ lastToolResults }) => String(lastToolResults[0]?.content),
  ]),
});

/** Delegates one `ask` and seven `hold`s to `sibling` in one turn. */
export const questionFanout = defineAgent({
  name: 'questionFanout',
  module: import.meta.url,
  instructions: 'Fan out.',
  subagents: [sibling],
  model: new ScriptedModel([
    {
      toolCalls: Array.from({ length: 8 }, (_, i) => ({
        name: 'task',
        arguments: { subagent: 'sibling', instructions: i === 0 ? 'ask' : 'hold' },
      })),
    },
    'done',
  ]),
});

/** A leaf of the cancel tree: its tool polls `isCancelled()` every millisecond until cancelled. */
export const treeLeaf = defineAgent({
  name: 'treeLeaf',
  module: import.meta.url,
  instructions: 'Poll.',
  tools: [
    defineTool({
      name: 'poll',
      description: 'poll until cancelled',
      parameters: z.object({}),
      timeoutMs: null,
      execute: async (_args, ctx) => {
        while (!ctx.isCancelled()) await new Promise((resolve) => setTimeout(resolve, 1));
        return 'cancelled';
      },
    }),
  ],
  model: new ScriptedModel([{ toolCalls: [{ name: 'poll' }] }, 'never']),
});

const LEAVES_PER_MID = 10;
const MIDS = 9;

/** The middle of the cancel tree: delegates ten leaves in one turn. */
export const treeMid = defineAgent({
  name: 'treeMid',
  module: import.meta.url,
  instructions: 'Delegate.',
  subagents: [treeLeaf],
  model: new ScriptedModel([
    {
      toolCalls: Array.from({ length: LEAVES_PER_MID }, () => ({
        name: 'task',
        arguments: { subagent: 'treeLeaf', instructions: 'poll' },
      })),
    },
    'never',
  ]),
});

/** The root of the cancel tree (a parent agent): nine middles, ninety leaves — 100 runs with it. */
export const treeRoot = defineAgent({
  name: 'treeRoot',
  module: import.meta.url,
  instructions: 'Delegate.',
  subagents: [treeMid],
  model: new ScriptedModel([
    {
      toolCalls: Array.from({ length: MIDS }, () => ({
        name: 'task',
        arguments: { subagent: 'treeMid', instructions: 'delegate' },
      })),
    },
    'never',
  ]),
});

/** Runs in the cancel tree, its root included. */
export const TREE_RUNS = 1 + MIDS + MIDS * LEAVES_PER_MID;
