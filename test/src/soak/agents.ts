// Agents for the soak tests (test/src/soak/*.test.ts). The parent `boss`
// (supervisor thread) reads a plan from its last user message: `sub` = what its
// one subagent (worker thread) does, `own` = whether the parent asks a person
// itself. Both models stream a few text deltas. Workers import this file by URL.
import { isMainThread } from 'node:worker_threads';
import {
  type Agent,
  defineAgent,
  defineTool,
  type Message,
  type Model,
  type ModelResponse,
  ToolResult,
} from '@troupe/core';
import { z } from 'zod';

export type SubKind = 'quick' | 'ask' | 'expire' | 'crunch' | 'tmo' | 'flaky' | 'exit';
export interface Plan {
  readonly sub: SubKind | 'none';
  readonly own: boolean;
}

const ask = defineTool({
  name: 'ask',
  description: 'Ask a person',
  parameters: z.object({ exp: z.boolean() }),
  timeoutMs: null,
  execute: ({ exp }, ctx) => {
    if (ctx.answer === undefined) {
      return ToolResult.pending({ kind: 'input', prompt: 'ask', ...(exp ? { expiresAt: Date.now() - 1 } : {}) });
    }
    return { ok: ctx.answer.ok };
  },
});

const crunch = defineTool({
  name: 'crunch',
  description: 'Waits for its cancel (an event), then throws it',
  parameters: z.object({}),
  timeoutMs: null,
  retries: 0,
  execute: async (_args, ctx) => {
    if (!ctx.signal.aborted) {
      await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));
    }
    ctx.throwIfCancelled();
    return 'crunched';
  },
});

const tmo = defineTool({
  name: 'tmo',
  description: 'Waits until its own deadline cancels it',
  parameters: z.object({}),
  timeoutMs: 5,
  retries: 1,
  execute: async (_args, ctx) => {
    if (!ctx.signal.aborted) {
      await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));
    }
    ctx.throwIfCancelled();
    return 'unreachable';
  },
});

const flaky = defineTool({
  name: 'flaky',
  description: 'Throws on its first attempt',
  parameters: z.object({}),
  retries: 1,
  execute: (_args, ctx) => {
    if (ctx.attempt <= 1) throw new Error('flaky');
    return { attempt: ctx.attempt };
  },
});

const exit = defineTool({
  name: 'exit',
  description: 'Kills its worker',
  parameters: z.object({}),
  execute: () => {
    if (!isMainThread) process.exit(7);
    return 'main thread';
  },
});

const pask = defineTool({
  name: 'pask',
  description: 'The parent asks a person',
  parameters: z.object({}),
  timeoutMs: null,
  execute: (_args, ctx) => {
    if (ctx.answer === undefined) return ToolResult.pending({ kind: 'input', prompt: 'pask' });
    return { ok: ctx.answer.ok };
  },
});

function lastUser(messages: readonly Message[]): string {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i] as Message;
    if (m.role === 'user') return String((m as { content: string }).content);
  }
  return '{}';
}

function turnsSinceUser(messages: readonly Message[]): number {
  let n = 0;
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i] as Message;
    if (m.role === 'user') break;
    if (m.role === 'assistant') n++;
  }
  return n;
}

function plannedModel(level: 0 | 1): Model {
  return {
    name: `soak${level}`,
    async generate({ messages, onDelta }): Promise<ModelResponse> {
      onDelta?.({ type: 'text', text: 'a' });
      onDelta?.({ type: 'text', text: 'b' });
      const usage = { inputTokens: 1, outputTokens: 1 };
      if (turnsSinceUser(messages) > 0) return { message: { role: 'assistant', content: 'ok' }, usage };
      const text = lastUser(messages);
      if (level === 0) {
        const plan = JSON.parse(text) as Plan;
        const calls: { id: string; name: string; arguments: unknown }[] = [];
        if (plan.sub !== 'none') {
          calls.push({ id: 'c0', name: 'task', arguments: { subagent: 'sub', instructions: plan.sub } });
        }
        if (plan.own) calls.push({ id: 'c1', name: 'pask', arguments: {} });
        if (calls.length === 0) return { message: { role: 'assistant', content: 'ok' }, usage };
        return { message: { role: 'assistant', content: '', toolCalls: calls }, usage };
      }
      const kind = text as SubKind;
      const name = kind === 'expire' ? 'ask' : kind;
      if (kind === 'quick') return { message: { role: 'assistant', content: 'ok' }, usage };
      const args = name === 'ask' ? { exp: kind === 'expire' } : {};
      return { message: { role: 'assistant', content: '', toolCalls: [{ id: 's0', name, arguments: args }] }, usage };
    },
  };
}

export const sub: Agent = defineAgent({
  name: 'sub',
  module: import.meta.url,
  instructions: 'Follow the plan.',
  tools: [ask, crunch, tmo, flaky, exit],
  model: plannedModel(1),
});

export const boss: Agent = defineAgent({
  name: 'boss',
  module: import.meta.url,
  instructions: 'Delegate as the plan says.',
  tools: [pask],
  subagents: [sub],
  model: plannedModel(0),
});
