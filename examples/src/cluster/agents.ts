// The cluster demo's agents. Worker hosts run `worker` (logical id `worker`);
// the API host runs `lead`, a parent that gives each line of its message to a
// worker. Every side effect is a line in the demo's ledger file (the toolContext
// names it), stamped with the host it ran on and the time (epoch ms).
import { appendFileSync } from 'node:fs';
import { defineAgent, defineTool, type Message, ToolResult } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import { z } from 'zod';

type Ledger = { readonly ledger: string };
const host = (): string => process.env.TROUPE_HOST_ID ?? 'api-host';
const now = (): number => performance.timeOrigin + performance.now();
const note = (ctx: { readonly toolContext: unknown }, line: string): void =>
  appendFileSync((ctx.toolContext as Ledger).ledger, `${line} ${host()} ${now()}\n`);
const key = z.object({ key: z.string() });

/** I/O-bound work (300 ms), so a fan-out holds a slot on every host. */
const work = defineTool({
  name: 'work',
  description: 'Works for 300 ms',
  parameters: key,
  execute: async ({ key }, ctx) => {
    note(ctx, `work ${key}`);
    await new Promise((r) => setTimeout(r, 300));
    return `worked on ${host()}`;
  },
});

/** Busy until cancelled: sees the cancel with one load of its slot. */
const spin = defineTool({
  name: 'spin',
  description: 'Busy until cancelled',
  parameters: key,
  execute: ({ key }, ctx) => {
    note(ctx, `spinning ${key}`);
    while (!ctx.isCancelled()) {}
    note(ctx, `cancelled ${key}`);
    return 'stopped';
  },
});

/** Asks a person; answered, notes it once. */
const ask = defineTool({
  name: 'ask',
  description: 'Asks a person',
  parameters: key,
  execute: ({ key }, ctx) => {
    if (ctx.answer === undefined) {
      note(ctx, `asked ${key}`);
      return ToolResult.pending({ kind: 'question', prompt: `May I ${key}?` });
    }
    note(ctx, `answered ${key}`);
    return `answered on ${host()}`;
  },
});

/** A side effect that must not run twice: it starts, then takes its time (a host may die meanwhile). */
const charge = defineTool({
  name: 'charge',
  description: 'Charges a card (not idempotent)',
  parameters: key,
  execute: async ({ key }, ctx) => {
    note(ctx, `charge ${key}`);
    await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));
    return 'charged';
  },
});

function task(messages: readonly Message[]): { word: string; key: string } {
  const [word = '', k = ''] = String(messages.find((m) => m.role === 'user')?.content ?? '').split(' ');
  return { word, key: k };
}

/** Does one thing on a worker host: `<tool> <key>`. */
export const worker = defineAgent({
  name: 'worker',
  description: 'Does one thing on a worker host',
  module: import.meta.url,
  instructions: 'Do what the task says.',
  tools: [work, spin, ask, charge],
  model: new ScriptedModel([
    ({ messages }) => {
      const { word, key: k } = task(messages);
      return { toolCalls: [{ name: word, arguments: { key: k } }] };
    },
    ({ lastToolResults }) => {
      const c = lastToolResults[0]?.content;
      return `${typeof c === 'string' ? c : JSON.stringify(c)} (on ${host()})`;
    },
  ]),
});

/** The API host's parent: each line of its message is a task of a worker, all in one turn. */
export const lead = defineAgent({
  name: 'lead',
  module: import.meta.url,
  instructions: 'Give each line to a worker.',
  subagents: [worker],
  model: new ScriptedModel(
    [
      ({ messages, lastToolResults }) => {
        if (messages[messages.length - 1]?.role === 'tool')
          return lastToolResults.map((r) => String(r.content)).join('\n');
        const user = [...messages].reverse().find((m) => m.role === 'user');
        const lines = String(user?.content ?? '')
          .split('\n')
          .filter((l) => l !== '');
        return {
          toolCalls: lines.map((instructions) => ({ name: 'task', arguments: { subagent: 'worker', instructions } })),
        };
      },
    ],
    { whenExhausted: 'repeat-last' },
  ),
});

/** What a worker host runs, by logical id. */
export const agents = { worker };
