/// <reference lib="es2024.sharedmemory" />
// Agents that replay the seed documents' own examples (nous ContextUpdate and
// ToolExecutor, sagents' context channels, toolnexus' ToolContext), loaded by
// worker threads by module URL. Tool runs are counted across threads in
// `toolContext.runs`, an Int32Array over a SharedArrayBuffer (shared, not copied).
import { ContextUpdate, defineAgent, defineTool, type ToolContext, ToolResult } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import { z } from 'zod';

/** Slots of `toolContext.runs`. */
export const Runs = Object.freeze({
  deploy: 0,
  login: 1,
  flaky: 2,
  refuses: 3,
  leaky: 4,
  protectedKey: 5,
  /** ctx.cancel(): 1 + isCancelled() before it, 1 + isCancelled() after it, and the tool's runs. */
  cancelBefore: 6,
  cancelAfter: 7,
  selfCancel: 8,
  badReason: 9,
  size: 10,
});

function count(ctx: { toolContext: Readonly<Record<string, unknown>> }, index: number): void {
  const runs = ctx.toolContext.runs;
  if (runs instanceof Int32Array) Atomics.add(runs, index, 1);
}

const report = ({ lastToolResults }: { lastToolResults: readonly { content: unknown; isError: boolean }[] }) =>
  JSON.stringify(lastToolResults.map((r) => (r.isError ? { error: r.content } : r.content)));

// --- nous ContextUpdate: the module's own example tools -------------------

interface Todo {
  readonly id: string;
  readonly text: string;
  readonly done: boolean;
}

/** nous `add_todo`: prepend a todo and `set` the list. */
const addTodo = defineTool({
  name: 'add_todo',
  description: 'Add a todo',
  parameters: z.object({ text: z.string() }),
  execute: ({ text }, ctx) => {
    const todos = (ctx.state.metadata.todos as readonly Todo[] | undefined) ?? [];
    const todo = { id: `todo-${todos.length + 1}`, text, done: false };
    return ToolResult.ok({ success: true, todo }, ContextUpdate.empty().set('todos', [todo, ...todos]));
  },
});

/** nous `increment_counter`: read, add one, `set`. */
const incrementCounter = defineTool({
  name: 'increment_counter',
  description: 'Count',
  parameters: z.object({}),
  execute: (_args, ctx) => {
    const count = ((ctx.state.metadata.counter as number | undefined) ?? 0) + 1;
    return ToolResult.ok({ count }, ContextUpdate.empty().set('counter', count));
  },
});

/** nous `add_note`: `append` to a list key. */
const addNote = defineTool({
  name: 'add_note',
  description: 'Note',
  parameters: z.object({ note: z.string() }),
  execute: ({ note }) => ToolResult.ok({ added: note }, ContextUpdate.empty().append('notes', note)),
});

/** nous `merge(:settings, ...)`: deep merge into a map key. */
const configure = defineTool({
  name: 'configure',
  description: 'Merge settings',
  parameters: z.object({ patch: z.record(z.string(), z.unknown()) }),
  execute: ({ patch }) => ToolResult.ok('merged', ContextUpdate.empty().merge('settings', patch)),
});

/** nous `delete(:temp_data)`. */
const forget = defineTool({
  name: 'forget',
  description: 'Delete a key',
  parameters: z.object({ key: z.string() }),
  execute: ({ key }) => ToolResult.ok('forgotten', ContextUpdate.empty().delete(key)),
});

/** nous `log_event(:tool_call, %{name: "search"})`: bookkeeping only, no metadata, no message. */
const audit = defineTool({
  name: 'audit',
  description: 'Record a bookkeeping event',
  parameters: z.object({}),
  execute: () => ToolResult.ok('audited', ContextUpdate.empty().logEvent('tool_call', { name: 'search' })),
});

/** Appends to a key that holds a string: the seed's reducer has no meaning for it (a typed error). */
const appendToString = defineTool({
  name: 'append_to_title',
  description: 'Append to a non-list',
  parameters: z.object({}),
  execute: () => ToolResult.ok('appended', ContextUpdate.empty().set('mine', 'kept').append('title', 'x')),
});

const show = defineTool({
  name: 'show',
  description: 'Report metadata and transcript size',
  parameters: z.object({}),
  execute: (_args, ctx) => ({ metadata: ctx.state.metadata, messages: ctx.state.messages.length }),
});

/** Runs the nous example tools over three turns, then reports what its last tool saw. */
export const notebook = defineAgent({
  name: 'notebook',
  module: import.meta.url,
  instructions: 'Keep notes.',
  tools: [addTodo, incrementCounter, addNote, configure, forget, audit, show],
  model: new ScriptedModel([
    {
      toolCalls: [
        { name: 'add_todo', arguments: { text: 'buy milk' } },
        { name: 'increment_counter' },
        { name: 'add_note', arguments: { note: 'a' } },
        { name: 'configure', arguments: { patch: { theme: 'light', font: { size: 12 }, tags: ['x', 'y'] } } },
        { name: 'forget', arguments: { key: 'obsolete' } },
      ],
    },
    {
      toolCalls: [
        { name: 'increment_counter' },
        { name: 'add_note', arguments: { note: 'b' } },
        { name: 'configure', arguments: { patch: { theme: 'dark', font: { family: 'mono' }, tags: ['z'] } } },
        { name: 'audit' },
      ],
    },
    { toolCalls: [{ name: 'show' }] },
    ({ lastToolResults }) => JSON.stringify(lastToolResults[0]?.content),
  ]),
});

/** One call whose update cannot be applied (append to a string). */
export const badAppend = defineAgent({
  name: 'badAppend',
  module: import.meta.url,
  instructions: 'Append wrongly.',
  tools: [appendToString],
  model: new ScriptedModel([{ toolCalls: [{ name: 'append_to_title' }] }, report]),
});

/** Builds an update with a library-owned key through the builder (which refuses it). */
const ownsTroupeKey = defineTool({
  name: 'owns_troupe_key',
  description: 'Set a protected key',
  parameters: z.object({}),
  execute: (_args, ctx) => {
    count(ctx, Runs.protectedKey);
    return ToolResult.ok('value', ContextUpdate.empty().set('mine', 'kept').set('troupe.owned', 1));
  },
});

export const protectedWriter = defineAgent({
  name: 'protectedWriter',
  module: import.meta.url,
  instructions: 'Write a protected key.',
  tools: [ownsTroupeKey],
  model: new ScriptedModel([{ toolCalls: [{ name: 'owns_troupe_key' }] }, report]),
});

// --- nous ToolExecutor ----------------------------------------------------

/** Throws on its first attempt; the default `retries: 1` gives it a second. */
const flaky = defineTool({
  name: 'flaky',
  description: 'Fails once',
  parameters: z.object({}),
  execute: (_args, ctx) => {
    count(ctx, Runs.flaky);
    if (ctx.attempt === 1) throw new Error('transient');
    return `ok on attempt ${ctx.attempt}`;
  },
});

/** Returns an error result: a normal outcome, never retried. */
const refuses = defineTool({
  name: 'refuses',
  description: 'Returns an error result',
  parameters: z.object({}),
  execute: (_args, ctx) => {
    count(ctx, Runs.refuses);
    return ToolResult.error('no such record');
  },
});

/** Fails holding a secret in its message (the telemetry seed's hazard). */
const leaky = defineTool({
  name: 'leaky',
  description: 'Throws a secret',
  parameters: z.object({}),
  retries: 0,
  execute: (_args, ctx) => {
    count(ctx, Runs.leaky);
    throw new Error('upstream refused key sk-seed-secret-123');
  },
});

/** One turn calling all three, then a report of the results. */
export const executor = defineAgent({
  name: 'executor',
  module: import.meta.url,
  instructions: 'Execute.',
  tools: [flaky, refuses, leaky],
  model: new ScriptedModel([{ toolCalls: [{ name: 'flaky' }, { name: 'refuses' }, { name: 'leaky' }] }, report]),
});

// --- sagents: the three channels ------------------------------------------

/** Reports the channels and whether the static toolContext can be written. */
const channels = defineTool({
  name: 'channels',
  description: 'Report the channels',
  parameters: z.object({}),
  execute: (_args, ctx: ToolContext<unknown, { featureFlags?: unknown; tenantName?: unknown }>) => {
    let writeRefused = false;
    try {
      (ctx.toolContext as Record<string, unknown>).tenantName = 'Evil Corp';
    } catch {
      writeRefused = true;
    }
    return {
      scope: ctx.scope,
      featureFlags: ctx.featureFlags,
      tenantName: ctx.tenantName,
      toolContextFrozen: Object.isFrozen(ctx.toolContext),
      writeRefused,
      tenantNameAfter: ctx.toolContext.tenantName,
      title: ctx.state.metadata.conversation_title,
    };
  },
});

export const channelProbe = defineAgent({
  name: 'channelProbe',
  module: import.meta.url,
  instructions: 'Probe.',
  tools: [channels],
  model: new ScriptedModel([{ toolCalls: [{ name: 'channels' }] }, report]),
});

// --- toolnexus ToolContext --------------------------------------------------

/** toolnexus example 3, as written: ask on the first pass, act on the answer. */
const deploy = defineTool({
  name: 'deploy',
  description: 'Deploy after asking where',
  parameters: z.object({}),
  execute: (_args, ctx) => {
    count(ctx, Runs.deploy);
    const answer = ctx.answer;
    if (answer !== undefined) {
      if (!answer.ok) return ToolResult.error(`declined: ${answer.reason ?? 'no reason'}`);
      const env = (answer.data as { env?: unknown } | undefined)?.env;
      return `deployed to ${env === undefined ? 'unknown' : String(env)}`;
    }
    return ToolResult.pending({ kind: 'input', prompt: 'Which environment?' });
  },
});

/** kind "authorization": the answer carries no payload; the tool re-runs the real work. */
const login = defineTool({
  name: 'login',
  description: 'Needs a session',
  parameters: z.object({}),
  execute: (_args, ctx) => {
    count(ctx, Runs.login);
    if (ctx.answer === undefined) return ToolResult.pending({ kind: 'authorization', prompt: 'Sign in, please' });
    return `fetched with a valid session (answer ok: ${ctx.answer.ok}, data: ${ctx.answer.data === undefined ? 'none' : 'some'})`;
  },
});

/** toolnexus example 2: timeoutMs may be unset; fall back to an own default. */
function budgetOf(ctx: { timeoutMs: number | undefined }): string {
  const budget = ctx.timeoutMs ?? 30_000;
  return `within ${budget}ms`;
}

const budgetTimed = defineTool({
  name: 'budget_timed',
  description: 'A 5 s budget',
  parameters: z.object({}),
  timeoutMs: 5000,
  execute: (_args, ctx) => budgetOf(ctx),
});

const budgetUnset = defineTool({
  name: 'budget_unset',
  description: 'No budget',
  parameters: z.object({}),
  timeoutMs: null,
  execute: (_args, ctx) => budgetOf(ctx),
});

/** "cancel() is on the context so a tool can also cancel its own subtree." */
const selfCancel = defineTool({
  name: 'self_cancel',
  description: 'Cancel from inside',
  parameters: z.object({}),
  execute: (_args, ctx) => {
    const runs = (ctx.toolContext as { runs?: unknown }).runs as Int32Array;
    Atomics.add(runs, Runs.selfCancel, 1);
    try {
      ctx.cancel('nonsense' as never);
    } catch (error) {
      if ((error as { code?: string }).code === 'ERR_INVALID_ARGUMENT') Atomics.store(runs, Runs.badReason, 1);
    }
    Atomics.store(runs, Runs.cancelBefore, 1 + Number(ctx.isCancelled()));
    const { cancel } = ctx; // an own closure: it works detached, as isCancelled does
    cancel();
    Atomics.store(runs, Runs.cancelAfter, 1 + Number(ctx.isCancelled()));
    return 'returned after cancelling';
  },
});

export const deployer = defineAgent({
  name: 'deployer',
  module: import.meta.url,
  instructions: 'Deploy.',
  tools: [deploy],
  model: new ScriptedModel([{ toolCalls: [{ name: 'deploy' }] }, report]),
});

export const fetcher = defineAgent({
  name: 'fetcher',
  module: import.meta.url,
  instructions: 'Fetch behind a login.',
  tools: [login],
  model: new ScriptedModel([{ toolCalls: [{ name: 'login' }] }, report]),
});

export const budgeted = defineAgent({
  name: 'budgeted',
  module: import.meta.url,
  instructions: 'Mind the budget.',
  tools: [budgetTimed, budgetUnset],
  model: new ScriptedModel([{ toolCalls: [{ name: 'budget_timed' }, { name: 'budget_unset' }] }, report]),
});

export const canceller = defineAgent({
  name: 'canceller',
  module: import.meta.url,
  instructions: 'Cancel yourself.',
  tools: [selfCancel],
  model: new ScriptedModel([{ toolCalls: [{ name: 'self_cancel' }] }, report]),
});

/**
 * A parent (it runs on the supervisor thread) that delegates to `notebook`
 * (merging its metadata back) or to `deployer`, picked by the message.
 */
export const seedLead = defineAgent({
  name: 'seedLead',
  module: import.meta.url,
  instructions: 'Lead.',
  subagents: [notebook, deployer],
  mergeMetadataFrom: ['notebook'],
  model: new ScriptedModel([
    ({ messages }) => {
      const last = messages[messages.length - 1];
      const which = typeof last?.content === 'string' && last.content.includes('deploy') ? 'deployer' : 'notebook';
      return { toolCalls: [{ name: 'task', arguments: { subagent: which, instructions: 'go' } }] };
    },
    report,
  ]),
});

/** The same delegation to `notebook`, without asking for its metadata back. */
export const isolatedLead = defineAgent({
  name: 'isolatedLead',
  module: import.meta.url,
  instructions: 'Lead, keep your own metadata.',
  subagents: [notebook],
  model: new ScriptedModel([
    { toolCalls: [{ name: 'task', arguments: { subagent: 'notebook', instructions: 'go' } }] },
    report,
  ]),
});

/** A parent whose own tool cancels its message while a subagent it delegated to still runs. */
const cancelTheTurn = defineTool({
  name: 'cancel_the_turn',
  description: 'Cancel this message',
  parameters: z.object({}),
  execute: async (_args, ctx) => {
    // Let the sibling task start its subagent first (it parks on its own cancellation).
    const runs = (ctx.toolContext as { runs?: unknown }).runs as Int32Array;
    const parked = Atomics.waitAsync(runs, Runs.selfCancel, 0);
    if (parked.async) await parked.value;
    ctx.cancel();
    return 'cancelled the turn';
  },
});

/** Waits until its run is cancelled, counting itself in `runs[Runs.selfCancel]`. */
const parkUntilCancelled = defineTool({
  name: 'park',
  description: 'Wait for a cancel',
  parameters: z.object({}),
  timeoutMs: null,
  execute: async (_args, ctx) => {
    const runs = (ctx.toolContext as { runs?: unknown }).runs as Int32Array;
    Atomics.add(runs, Runs.selfCancel, 1);
    Atomics.notify(runs, Runs.selfCancel);
    await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));
    return 'parked';
  },
});

export const parker = defineAgent({
  name: 'parker',
  module: import.meta.url,
  instructions: 'Park.',
  tools: [parkUntilCancelled],
  model: new ScriptedModel([{ toolCalls: [{ name: 'park' }] }, report]),
});

export const turnCanceller = defineAgent({
  name: 'turnCanceller',
  module: import.meta.url,
  instructions: 'Delegate, then cancel the turn.',
  tools: [cancelTheTurn],
  subagents: [parker],
  model: new ScriptedModel([
    {
      toolCalls: [
        { name: 'task', arguments: { subagent: 'parker', instructions: 'park' } },
        { name: 'cancel_the_turn' },
      ],
    },
    report,
  ]),
});
