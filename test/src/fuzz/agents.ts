// Agents for the public-API fuzz (test/src/fuzz/*.fuzz.test.ts) and the
// regression tests it found (requests/, lifecycle/). Every run reads
// what to do from its last user message, a JSON plan: a parent agent (`lead`,
// on the supervisor thread) delegates to subagents on worker threads (`sub1`,
// which may delegate once more to `sub2`) and may ask a question or an approval
// itself; a subagent answers, asks a person, crunches CPU polling
// isCancelled(), times out (politely or never yielding), fails and retries,
// asks for an approval, has its model fail, or kills its worker. Workers
// import this file by URL (`module: import.meta.url`).
import { isMainThread } from 'node:worker_threads';
import {
  type Agent,
  defineAgent,
  defineTool,
  type Message,
  type Model,
  type ModelResponse,
  type ToolMessage,
  ToolResult,
} from '@troupe/core';
import { z } from 'zod';

/** What one subagent run does. `n` is a nonce unique in a scenario; `u` the input tokens of each model turn. */
export type SubPlan =
  | { readonly k: 'quick'; readonly n: string; readonly u: number }
  | { readonly k: 'ask'; readonly n: string; readonly u: number; readonly exp: boolean }
  | { readonly k: 'crunch'; readonly n: string; readonly u: number; readonly iters: number }
  | { readonly k: 'tmo'; readonly n: string; readonly u: number }
  | { readonly k: 'spin'; readonly n: string; readonly u: number }
  | { readonly k: 'flaky'; readonly n: string; readonly u: number; readonly fails: number }
  | { readonly k: 'approve'; readonly n: string; readonly u: number; readonly d: Decision }
  | { readonly k: 'mfail'; readonly n: string; readonly u: number }
  | { readonly k: 'exit'; readonly n: string; readonly u: number }
  | { readonly k: 'nest'; readonly n: string; readonly u: number; readonly child: SubPlan };

export type Decision = 'approve' | 'reject' | 'ask' | 'edit';

/** What one message of `lead` does: its task calls (in parallel) and maybe a question or approval of its own. */
export interface LeadPlan {
  readonly n: string;
  readonly u: number;
  readonly items: readonly SubPlan[];
  readonly own: 'none' | 'ask' | 'approve-ask' | 'approve';
}

/** Resolves when the call's run is cancelled (its deadline included): an event, not a timed poll. */
function cancelled(signal: AbortSignal): Promise<void> {
  return signal.aborted
    ? Promise.resolve()
    : new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
}

const ask = defineTool({
  name: 'ask',
  description: 'Ask a person',
  parameters: z.object({ n: z.string(), exp: z.boolean() }),
  timeoutMs: null,
  execute: ({ n, exp }, ctx) => {
    if (ctx.answer === undefined) {
      return ToolResult.pending({
        kind: 'input',
        prompt: `ask:${n}`,
        data: { n },
        ...(exp ? { expiresAt: Date.now() - 1 } : {}),
      });
    }
    const got = (ctx.answer.data as { n?: unknown } | undefined)?.n;
    return { n, got, match: got === n };
  },
});

const crunch = defineTool({
  name: 'crunch',
  description: 'CPU-bound work that polls isCancelled()',
  parameters: z.object({ iters: z.number() }),
  timeoutMs: null,
  retries: 0,
  execute: ({ iters }, ctx) => {
    let i = 0;
    for (; i < iters && !ctx.isCancelled(); i++) {
      // CPU-bound work between polls (no sleep): a cancel reaches it through the shared flag.
      let x = 0;
      for (let j = 0; j < 100_000; j++) x += j;
      if (x < 0) break;
    }
    ctx.throwIfCancelled();
    return { crunched: i };
  },
});

const tmo = defineTool({
  name: 'tmo',
  description: 'Polls until its own deadline cancels it',
  parameters: z.object({}),
  timeoutMs: 30,
  retries: 2,
  execute: async (_args, ctx) => {
    await cancelled(ctx.signal);
    ctx.throwIfCancelled();
    return 'unreachable';
  },
});

const spin = defineTool({
  name: 'spin',
  description: 'Never yields: only the watchdog stops it',
  parameters: z.object({}),
  timeoutMs: 40,
  retries: 1,
  execute: () => {
    for (;;) {
      // never yields, never checks
    }
  },
});

const flaky = defineTool({
  name: 'flaky',
  description: 'Throws on its first attempts',
  parameters: z.object({ fails: z.number() }),
  retries: 1,
  execute: ({ fails }, ctx) => {
    if (ctx.attempt <= fails) throw new Error(`flaky attempt ${ctx.attempt}`);
    return { attempt: ctx.attempt };
  },
});

const guarded = defineTool({
  name: 'guarded',
  description: 'Needs approval',
  parameters: z.object({ n: z.string(), d: z.string() }),
  requiresApproval: true,
  execute: ({ n, d }) => ({ n, ran: d }),
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
  parameters: z.object({ n: z.string() }),
  timeoutMs: null,
  execute: ({ n }, ctx) => {
    if (ctx.answer === undefined) return ToolResult.pending({ kind: 'input', prompt: `ask:${n}`, data: { n } });
    const got = (ctx.answer.data as { n?: unknown } | undefined)?.n;
    return { n, got, match: got === n };
  },
});

function lastUser(messages: readonly Message[]): number {
  for (let i = messages.length - 1; i >= 0; i--) if ((messages[i] as Message).role === 'user') return i;
  return -1;
}

function resultOf(t: ToolMessage): unknown {
  if (!t.isError) return t.content;
  const c = t.content as { code?: unknown; error?: unknown } | null;
  return { error: typeof c?.code === 'string' ? c.code : String(c?.error ?? JSON.stringify(c)) };
}

function call(name: string, args: unknown, id: string) {
  return { id, name, arguments: args };
}

function subCalls(plan: SubPlan, next: string): ModelResponse['message']['toolCalls'] {
  const id = `${plan.n}_0`;
  switch (plan.k) {
    case 'quick':
      return undefined;
    case 'ask':
      return [call('ask', { n: plan.n, exp: plan.exp }, id)];
    case 'crunch':
      return [call('crunch', { iters: plan.iters }, id)];
    case 'tmo':
      return [call('tmo', {}, id)];
    case 'spin':
      return [call('spin', {}, id)];
    case 'flaky':
      return [call('flaky', { fails: plan.fails }, id)];
    case 'approve':
      return [call('guarded', { n: plan.n, d: plan.d }, id)];
    case 'mfail':
      return undefined;
    case 'exit':
      return [call('exit', {}, id)];
    case 'nest':
      return [call('task', { subagent: next, instructions: JSON.stringify(plan.child) }, id)];
  }
}

function planModel(level: 0 | 1 | 2): Model {
  return {
    name: `fuzz${level}`,
    async generate({ messages }): Promise<ModelResponse> {
      const user = lastUser(messages);
      const plan = JSON.parse(String((messages[user] as { content: string }).content)) as LeadPlan | SubPlan;
      const usage = { inputTokens: plan.u, outputTokens: 1 };
      const after = messages.slice(user + 1);
      const turn = after.filter((m) => m.role === 'assistant').length;
      if (turn === 0) {
        if (level === 0) {
          const lead = plan as LeadPlan;
          const calls = lead.items.map((item, i) =>
            call('task', { subagent: 'sub1', instructions: JSON.stringify(item) }, `${lead.n}_${i}`),
          );
          if (lead.own === 'ask') calls.push(call('pask', { n: lead.n }, `${lead.n}_own`));
          if (lead.own === 'approve' || lead.own === 'approve-ask') {
            calls.push(call('guarded', { n: lead.n, d: lead.own === 'approve' ? 'approve' : 'ask' }, `${lead.n}_own`));
          }
          if (calls.length === 0) {
            return { message: { role: 'assistant', content: JSON.stringify({ n: lead.n }) }, usage };
          }
          return { message: { role: 'assistant', content: '', toolCalls: calls }, usage };
        }
        const sub = plan as SubPlan;
        if (sub.k === 'mfail') throw new Error(`scripted model failure ${sub.n}`);
        const calls = subCalls(sub, 'sub2');
        if (calls === undefined)
          return { message: { role: 'assistant', content: JSON.stringify({ n: sub.n }) }, usage };
        return { message: { role: 'assistant', content: '', toolCalls: calls }, usage };
      }
      const tools = after.filter((m): m is ToolMessage => m.role === 'tool');
      const report = { n: plan.n, results: tools.map(resultOf) };
      return { message: { role: 'assistant', content: JSON.stringify(report) }, usage };
    },
  };
}

const leafTools = [ask, crunch, tmo, spin, flaky, guarded, exit];

export const sub2: Agent = defineAgent({
  name: 'sub2',
  module: import.meta.url,
  instructions: 'Follow the plan.',
  tools: leafTools,
  model: planModel(2),
});

export const sub1: Agent = defineAgent({
  name: 'sub1',
  module: import.meta.url,
  instructions: 'Follow the plan.',
  tools: leafTools,
  subagents: [sub2],
  model: planModel(1),
});

export const lead: Agent = defineAgent({
  name: 'lead',
  module: import.meta.url,
  instructions: 'Delegate as the plan says.',
  tools: [pask, guarded],
  subagents: [sub1],
  model: planModel(0),
});
