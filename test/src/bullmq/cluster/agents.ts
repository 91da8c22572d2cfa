// The agents of the cluster tests: the API host imports them (a parent's
// subagents), each worker host maps logical ids to them. A subagent's task says
// what it does, one word and a key:
//   `effect <key>`  a side effect that is not idempotent: a line `done <key> <host>` in the
//                   effects file (toolContext.effects), written once it returns;
//   `hold <key>`    the same, but it writes `start <key> <host>` first and then holds until
//                   cancelled (a host killed mid-tool: the side effect never committed), when it
//                   writes `released <key> <host>`;
//   `idem <key>`    as `hold`, but idempotent (re-run after a crash);
//   `spin <key>`    loops until it sees its cancel, and writes `cancelled <key> <host> <epoch ms>`;
//   `ask <key>`     asks a person; when answered, writes `answered <key> <host>` once;
//   `where`         answers with the host it runs on.
// The host is TROUPE_HOST_ID from the worker host's environment. The `streamer` agent does the
// same with a real model: an OpenAI-compatible server of the test's own (its address in
// TROUPE_TEST_OPENAI_BASE_URL), asked with the header `x-troupe-host: <host>`.
import { appendFileSync, readFileSync } from 'node:fs';
import { defineAgent, defineTool, type Message, ToolResult } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import { openaiModel } from '@troupe/openai';
import { z } from 'zod';

type EffectsContext = { readonly effects: string };

const host = (): string => process.env.TROUPE_HOST_ID ?? 'api-host';
const now = (): number => performance.timeOrigin + performance.now();

function note(ctx: { readonly toolContext: EffectsContext }, line: string): void {
  appendFileSync(ctx.toolContext.effects, `${line}\n`);
}

async function holdUntilCancelled(ctx: { isCancelled(): boolean; signal: AbortSignal }): Promise<void> {
  if (ctx.isCancelled()) return;
  await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));
}

const key = z.object({ key: z.string() });

export const effect = defineTool({
  name: 'effect',
  description: 'A side effect that must not run twice',
  parameters: key,
  execute: ({ key }, ctx: { readonly toolContext: EffectsContext }) => {
    note(ctx, `done ${key} ${host()}`);
    return 'ok';
  },
});

export const hold = defineTool({
  name: 'hold',
  description: 'A side effect that starts and holds',
  parameters: key,
  execute: async ({ key }, ctx) => {
    note(ctx as never, `start ${key} ${host()}`);
    await holdUntilCancelled(ctx);
    note(ctx as never, `released ${key} ${host()}`);
    return 'released';
  },
});

export const idem = defineTool({
  name: 'idem',
  description: 'An idempotent side effect that starts and holds the first time, and completes when run again',
  parameters: key,
  idempotent: true,
  execute: async ({ key }, ctx) => {
    const again = readFileSync((ctx.toolContext as EffectsContext).effects, 'utf8').includes(`start ${key} `);
    note(ctx as never, `start ${key} ${host()}`);
    if (!again) await holdUntilCancelled(ctx);
    return again ? 'completed' : 'released';
  },
});

export const spin = defineTool({
  name: 'spin',
  description: 'Busy until cancelled',
  parameters: key,
  execute: ({ key }, ctx) => {
    note(ctx as never, `spinning ${key} ${host()}`);
    // Busy: no await, only the shared-memory check (what a CPU-bound tool sees).
    while (!ctx.isCancelled()) {}
    note(ctx as never, `cancelled ${key} ${host()} ${now()}`);
    return 'stopped';
  },
});

export const ask = defineTool({
  name: 'ask',
  description: 'Asks a person',
  parameters: key,
  execute: ({ key }, ctx) => {
    if (ctx.answer === undefined) {
      note(ctx as never, `asked ${key} ${host()}`);
      return ToolResult.pending({ kind: 'question', prompt: `May I ${key}?` });
    }
    note(ctx as never, `answered ${key} ${host()}`);
    return `answered on ${host()}`;
  },
});

function task(messages: readonly Message[]): { word: string; key: string } {
  const first = messages.find((m) => m.role === 'user');
  const [word = '', k = ''] = String(first?.content ?? '').split(' ');
  return { word, key: k };
}

/** The subagent every worker host runs (logical id `worker`). */
export const worker = defineAgent({
  name: 'worker',
  description: 'Does one thing on a worker host',
  module: import.meta.url,
  instructions: 'Do what the task says.',
  tools: [effect, hold, idem, spin, ask],
  model: new ScriptedModel([
    ({ messages }) => {
      const { word, key: k } = task(messages);
      if (word === 'where') return `on ${host()}`;
      return { toolCalls: [{ name: word, arguments: { key: k } }] };
    },
    ({ lastToolResults }) => {
      const content = lastToolResults[0]?.content;
      return `${typeof content === 'string' ? content : JSON.stringify(content)} on ${host()}`;
    },
  ]),
});

/** Where the test's OpenAI-compatible server listens (the worker hosts inherit it). */
export const BASE_URL_VARIABLE = 'TROUPE_TEST_OPENAI_BASE_URL';

/** The `worker`'s tools on a model served over HTTP (logical id `streamer`). */
export const streamer = defineAgent({
  name: 'streamer',
  description: 'Does what its model says, on a worker host',
  module: import.meta.url,
  instructions: 'Do what the task says.',
  tools: [effect, hold, idem, spin, ask],
  model: openaiModel({
    model: 'test-model',
    baseURL: process.env[BASE_URL_VARIABLE] ?? 'http://127.0.0.1:9/v1',
    apiKey: 'sk-cluster',
    maxAttempts: 1,
    headers: { 'x-troupe-host': host() },
  }),
});

/** What a worker host runs, by logical id. */
export const agents = { worker, streamer };

/**
 * A parent on the API host: each line `<word> <key>` of its message becomes a task of a
 * `worker`, all in one turn; its answer is the workers' answers, one per line.
 */
export const coordinator = defineAgent({
  name: 'coordinator',
  module: import.meta.url,
  instructions: 'Delegate each line to a worker.',
  subagents: [worker],
  model: new ScriptedModel(
    [
      ({ messages, lastToolResults }) => {
        if (messages[messages.length - 1]?.role === 'tool') {
          return lastToolResults
            .map((r) => (r.isError ? `error: ${JSON.stringify(r.content)}` : String(r.content)))
            .join('\n');
        }
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
