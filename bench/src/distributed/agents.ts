// The distributed suite's agents, run by its worker-host processes (by logical id) and
// spawned by its API host. Each writes what it saw to the file its toolContext names,
// stamped in epoch ms (`performance.timeOrigin + performance.now()`: one clock for every
// process of the machine).
import { appendFileSync } from 'node:fs';
import { defineAgent, defineTool } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import { z } from 'zod';

const now = (): number => performance.timeOrigin + performance.now();
const log = (ctx: { readonly toolContext: unknown }, line: string): void =>
  appendFileSync((ctx.toolContext as { log: string }).log, `${line}\n`);

/** Busy until cancelled; notes when it started and when it saw the cancel. */
const spin = defineTool({
  name: 'spin',
  description: 'Busy until cancelled',
  parameters: z.object({}),
  execute: (_args, ctx) => {
    log(ctx, `spinning ${process.env.TROUPE_HOST_ID ?? ''}`);
    while (!ctx.isCancelled()) {}
    log(ctx, `seen ${now()}`);
    return 'stopped';
  },
});

/** I/O-bound work: waits `ms` (a network call's time), then answers. */
const wait = defineTool({
  name: 'wait',
  description: 'Waits, as a network call does',
  parameters: z.object({ ms: z.number() }),
  idempotent: true,
  execute: async ({ ms }, ctx) => {
    log(ctx, `start ${process.env.TROUPE_HOST_ID ?? ''} ${now()}`);
    await new Promise((r) => setTimeout(r, ms));
    return 'waited';
  },
});

const callOnce = (name: string, args: unknown) =>
  new ScriptedModel([{ toolCalls: [{ name, arguments: args }] }, 'done'], { whenExhausted: 'repeat-last' });

export const spinner = defineAgent({
  name: 'spinner',
  module: import.meta.url,
  instructions: '',
  tools: [spin],
  model: callOnce('spin', {}),
});

/** One `wait` call of the milliseconds its task names. */
export const waiter = defineAgent({
  name: 'waiter',
  module: import.meta.url,
  instructions: '',
  tools: [wait],
  model: new ScriptedModel(
    [
      ({ messages }) => ({
        toolCalls: [{ name: 'wait', arguments: { ms: Number(messages.find((m) => m.role === 'user')?.content) } }],
      }),
      'done',
    ],
    { whenExhausted: 'repeat-last' },
  ),
});

export const agents = { spinner, waiter };

/** A parent on the API host (its conversation is saved): one task of `waiter` with its message. */
export const delegating = defineAgent({
  name: 'delegating',
  module: import.meta.url,
  instructions: '',
  subagents: [waiter],
  model: new ScriptedModel(
    [
      ({ messages }) =>
        messages[messages.length - 1]?.role === 'tool'
          ? 'done'
          : {
              toolCalls: [
                {
                  name: 'task',
                  arguments: {
                    subagent: 'waiter',
                    instructions: String(messages.find((m) => m.role === 'user')?.content),
                  },
                },
              ],
            },
    ],
    { whenExhausted: 'repeat-last' },
  ),
});
