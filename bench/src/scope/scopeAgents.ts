// Agents of the scope suite. The shared-scope stretch: a subagent whose one tool reads one
// top-level key of its scope, copied (the product's path) or shared (the
// prototype). Workers import this module by URL.
import { defineAgent, defineTool } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import { z } from 'zod';
import { readSharedKey, type SharedScopeHandle } from './SharedScope.js';

const lastUser = (messages: readonly { role: string; content?: unknown }[]): string => {
  for (let i = messages.length - 1; i >= 0; i--) if (messages[i]?.role === 'user') return String(messages[i]?.content);
  return '';
};

// Turn 1: read the key named by the task's instructions; turn 2: answer with what the tool saw.
const readOnce = new ScriptedModel([
  ({ messages }) => ({ toolCalls: [{ id: 'read', name: 'read', arguments: { key: lastUser(messages) } }] }),
  ({ lastToolResults }) => String(lastToolResults[0]?.content),
]);

// The tool answers with a short digest, never the value: the answer crosses back to the supervisor.
const digest = (value: unknown): string =>
  typeof value === 'object' && value !== null ? `object:${Object.keys(value).length}` : typeof value;

// A subagent whose one tool reads one key of its scope with `read` and answers with a digest.
function reader(name: string, read: (scope: unknown, key: string) => unknown) {
  return defineAgent({
    name,
    module: import.meta.url,
    instructions: 'Read one key of the scope.',
    model: readOnce,
    tools: [
      defineTool({
        name: 'read',
        description: 'read one top-level key of the scope',
        parameters: z.object({ key: z.string() }),
        execute: ({ key }, ctx) => digest(read(ctx.scope, key)),
      }),
    ],
  });
}

/** Reads one key of a copied scope (`ctx.scope[key]`). */
export const copyReader = reader('copyReader', (scope, key) => (scope as Readonly<Record<string, unknown>>)[key]);

/** Reads one key of a shared scope (`readSharedKey(ctx.scope, key)`). */
export const sharedReader = reader('sharedReader', (scope, key) =>
  readSharedKey(scope as unknown as SharedScopeHandle, key),
);

/** Answers at once, no tools: the leaf of the per-layer decomposition of a lean hop. */
export const leaf = defineAgent({
  name: 'leaf',
  module: import.meta.url,
  instructions: 'Answer.',
  model: ScriptedModel.answering('done'),
});

/** Delegates once to `leaf` with its `task` tool and answers with what came back: a two-hop chain. */
export const relay = defineAgent({
  name: 'relay',
  module: import.meta.url,
  instructions: 'Relay to the leaf.',
  model: new ScriptedModel([
    () => ({ toolCalls: [{ id: 'hop', name: 'task', arguments: { subagent: 'leaf', instructions: 'go' } }] }),
    ({ lastToolResults }) => String(lastToolResults[0]?.content),
  ]),
  subagents: [leaf],
});
