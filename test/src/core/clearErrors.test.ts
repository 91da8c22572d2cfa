// Issue 16, item 6: errors that name what works. One test per rule: the
// scope-over-budget error names the option that sets the budget of the scope
// as it was defined; a model's tool call without an id (or with a repeated
// one) is reported and not run, never given a made-up id and run; an agent
// module must be a file: URL, and an https: URL is refused like a path.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  type AgentId,
  defineAgent,
  defineScope,
  defineTool,
  isTroupeError,
  type Message,
  type Model,
  type ModelRequest,
  sealScope,
} from '@troupe/core';
import { initialLoopState, localRunCancellation, type RunContext, runAgentLoop } from '@troupe/core/internal';
import { ManualClock, ScriptedModel } from '@troupe/core/testing';
import { createSupervisor } from '@troupe/supervisor';
import { z } from 'zod';

const heavy = { tenantId: 'acme', blob: 'x'.repeat(200) };

describe('the scope-over-budget error names the option that sets that budget', () => {
  it('a scope defined with a schema: defineScope(schema, { budgetBytes }), not scopeBudgetBytes', async () => {
    const Scope = defineScope(z.object({ tenantId: z.string(), blob: z.string() }), { budgetBytes: 64 });
    // scopeBudgetBytes is given too: it does not apply to a scope the schema parses, so it must not be suggested.
    await using supervisor = createSupervisor({
      scope: Scope,
      scopeBudgetBytes: 1024,
      persistence: null,
      pool: { threads: 1 },
    });
    const agent = defineAgent({ name: 'a', instructions: '', model: new ScriptedModel(['ok']) });
    await assert.rejects(
      supervisor.startAgent(agent, { scope: heavy }),
      (error: unknown) =>
        isTroupeError(error, 'ERR_SCOPE_OVER_BUDGET') &&
        error.message.includes('over the 64 B budget') &&
        error.message.includes('raise the budget with defineScope(schema, { budgetBytes })') &&
        !error.message.includes('scopeBudgetBytes'),
    );
  });

  it('a scope given without a schema: createSupervisor({ scopeBudgetBytes })', async () => {
    await using supervisor = createSupervisor({ scopeBudgetBytes: 64, persistence: null, pool: { threads: 1 } });
    const agent = defineAgent({ name: 'a', instructions: '', model: new ScriptedModel(['ok']) });
    await assert.rejects(
      supervisor.startAgent(agent, { scope: { ...heavy } }),
      (error: unknown) =>
        isTroupeError(error, 'ERR_SCOPE_OVER_BUDGET') &&
        error.message.includes('over the 64 B budget') &&
        error.message.includes('raise the budget with createSupervisor({ scopeBudgetBytes })') &&
        !error.message.includes('defineScope'),
    );
  });

  it('sealScope names the option its caller passes', () => {
    assert.throws(
      () => sealScope({ ...heavy }, 64, 'measureScope({ budgetBytes })'),
      (error: unknown) =>
        isTroupeError(error, 'ERR_SCOPE_OVER_BUDGET') &&
        error.message.endsWith('raise the budget with measureScope({ budgetBytes })'),
    );
  });
});

const run: RunContext = {
  scope: sealScope({ tenantId: 'acme' }),
  toolContext: Object.freeze({}),
  agentId: 'agent_ids' as AgentId,
  parentAgentId: undefined,
};

/** A Model that answers with these tool calls once, as given (no ids added), then with the results it saw. */
function rawModel(toolCalls: readonly unknown[]): Model & { readonly seen: readonly Message[][] } {
  const seen: Message[][] = [];
  return {
    seen,
    async generate(request: ModelRequest) {
      seen.push([...request.messages]);
      return seen.length === 1
        ? { message: { role: 'assistant', content: '', toolCalls: toolCalls as never } }
        : { message: { role: 'assistant', content: 'done' } };
    },
  };
}

async function runWith(toolCalls: readonly unknown[]) {
  const runs: number[] = [];
  const add = defineTool({
    name: 'add',
    description: 'add two numbers',
    parameters: z.object({ a: z.number(), b: z.number() }),
    execute: ({ a, b }) => {
      runs.push(a + b);
      return a + b;
    },
  });
  const model = rawModel(toolCalls);
  const agent = defineAgent({ name: 'adder', instructions: '', tools: [add], model });
  const outcome = await runAgentLoop({
    agent,
    run,
    state: initialLoopState(run.agentId, '', Object.freeze({})),
    input: 'add',
    clock: new ManualClock(),
    cancellation: localRunCancellation(),
  });
  const results = (model.seen[1] ?? []).filter((m) => m.role === 'tool');
  return { outcome, runs, results };
}

describe("a model's tool call without an id is reported, not given one and run", () => {
  it('a call without an id gets an ERR_TOOL_VALIDATION result saying so, and its tool never runs', async () => {
    const { outcome, runs, results } = await runWith([
      { name: 'add', arguments: { a: 1, b: 2 } },
      { id: 'c-2', name: 'add', arguments: { a: 3, b: 4 } },
    ]);
    assert.equal(outcome.status, 'done');
    assert.deepEqual(runs, [7], 'only the call with an id ran');
    assert.equal(results.length, 2);
    const [missing, given] = results;
    assert.ok(missing?.role === 'tool' && missing.isError);
    const content = missing.content as { code: string; error: string };
    assert.equal(content.code, 'ERR_TOOL_VALIDATION');
    assert.match(content.error, /call 1 \("add"\) of the answer has no id, so it was not run/);
    assert.match(content.error, /a Model must give every tool call an id/);
    assert.ok(given?.role === 'tool' && !given.isError && given.toolCallId === 'c-2' && given.content === 7);
  });

  it('a call repeating an id of the same answer is reported and not run; the first one runs', async () => {
    const { runs, results } = await runWith([
      { id: 'same', name: 'add', arguments: { a: 1, b: 1 } },
      { id: 'same', name: 'add', arguments: { a: 5, b: 5 } },
    ]);
    assert.deepEqual(runs, [2]);
    const [first, second] = results;
    assert.ok(first?.role === 'tool' && first.toolCallId === 'same' && first.content === 2);
    assert.ok(second?.role === 'tool' && second.isError && second.toolCallId !== 'same');
    assert.match((second.content as { error: string }).error, /has the id "same" of an earlier call/);
  });
});

describe('an agent module must be a file: URL', () => {
  const model = new ScriptedModel(['ok']);
  const refused = (module: string, kind: RegExp) =>
    assert.throws(
      () => defineAgent({ name: 'remote', module, instructions: '', model }),
      (error: unknown) =>
        isTroupeError(error, 'ERR_INVALID_ARGUMENT') &&
        error.message.includes(JSON.stringify(module)) &&
        kind.test(error.message) &&
        error.message.endsWith('pass import.meta.url'),
    );

  it('an https: URL is refused at definition, like a path (a worker imports files only)', () => {
    refused('https://example.com/agents/remote.js', /\(a https: URL\)/);
  });

  it('a path is refused, naming it as a path', () => {
    refused('/srv/app/agents/remote.js', /\(a path, not a URL\)/);
  });

  it('a file: URL is taken', () => {
    assert.equal(
      defineAgent({ name: 'local', module: import.meta.url, instructions: '', model }).module,
      import.meta.url,
    );
  });
});
