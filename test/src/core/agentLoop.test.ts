import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  type AgentId,
  CancelSource,
  ContextUpdate,
  defineAgent,
  defineTool,
  type LoopState,
  sealScope,
  ToolResult,
} from '@troupe/core';
import {
  createTaskTool,
  initialLoopState,
  localRunCancellation,
  type RunContext,
  runAgentLoop,
  type TaskSpawner,
} from '@troupe/core/internal';
import { ManualClock, ScriptedModel } from '@troupe/core/testing';
import { z } from 'zod';

const clock = new ManualClock();
const run: RunContext = {
  scope: sealScope({ userId: 'u1' }),
  toolContext: Object.freeze({ flag: true }),
  agentId: 'agent_a' as AgentId,
  parentAgentId: undefined,
};
const fresh = (metadata: Record<string, unknown> = {}): LoopState =>
  initialLoopState(run.agentId, 'You are a test agent.', Object.freeze(metadata));

const add = defineTool({
  name: 'add',
  description: 'add two numbers',
  parameters: z.object({ a: z.number(), b: z.number() }),
  execute: ({ a, b }) => a + b,
});

describe('runAgentLoop', () => {
  it('runs model turn → tools → results → next turn until the model answers', async () => {
    const agent = defineAgent({
      name: 'adder',
      instructions: 'Add.',
      tools: [add],
      model: new ScriptedModel([
        {
          toolCalls: [
            { name: 'add', arguments: { a: 1, b: 2 } },
            { name: 'add', arguments: { a: 3, b: 4 } },
          ],
          usage: { inputTokens: 10, outputTokens: 2 },
        },
        ({ lastToolResults }) => ({
          text: `sums ${lastToolResults.map((r) => r.content).join(',')}`,
          usage: { inputTokens: 5, outputTokens: 1 },
        }),
      ]),
    });
    const outcome = await runAgentLoop({
      agent,
      run,
      state: fresh(),
      input: 'add',
      clock,
      cancellation: localRunCancellation(),
    });
    assert.equal(outcome.status, 'done');
    assert.equal(outcome.status === 'done' && outcome.text, 'sums 3,7');
    assert.equal(outcome.state.turns, 2);
    assert.deepEqual(outcome.state.usage, { inputTokens: 15, outputTokens: 3 });
    assert.deepEqual(
      outcome.state.messages.map((m) => m.role),
      ['system', 'user', 'assistant', 'tool', 'tool', 'assistant'],
    );
  });

  it('ends incomplete at the turn limit', async () => {
    const agent = defineAgent({
      name: 'looper',
      instructions: '',
      maxTurns: 2,
      tools: [add],
      model: new ScriptedModel([{ toolCalls: [{ name: 'add', arguments: { a: 1, b: 1 } }] }], {
        whenExhausted: 'repeat-last',
      }),
    });
    const outcome = await runAgentLoop({
      agent,
      run,
      state: fresh(),
      input: 'go',
      clock,
      cancellation: localRunCancellation(),
    });
    assert.equal(outcome.status, 'incomplete');
    assert.equal(outcome.state.turns, 2);
  });

  it('bounds each message by maxTurns, not the conversation', async () => {
    const agent = defineAgent({
      name: 'chatty',
      instructions: '',
      maxTurns: 2,
      model: new ScriptedModel(['hello'], { whenExhausted: 'repeat-last' }),
    });
    let state = fresh();
    for (let message = 1; message <= 5; message++) {
      const outcome = await runAgentLoop({
        agent,
        run,
        state,
        input: `message ${message}`,
        clock,
        cancellation: localRunCancellation(),
      });
      assert.equal(outcome.status, 'done', `message ${message} answered after ${state.turns} turns`);
      state = outcome.state;
    }
    assert.equal(state.turns, 5);
  });

  it('turns bad arguments, unknown tools and malformed calls into error results the model sees', async () => {
    const agent = defineAgent({
      name: 'sloppy',
      instructions: '',
      tools: [add],
      model: new ScriptedModel([
        {
          toolCalls: [
            { name: 'add', arguments: { a: 'x', b: 1 } },
            { name: 'missing', arguments: {} },
            { name: 'add', arguments: '{broken' },
            { name: 'add', arguments: '{"a":2,"b":2}' },
          ],
        },
        ({ lastToolResults }) =>
          JSON.stringify(lastToolResults.map((r) => (r.isError ? (r.content as { code: string }).code : r.content))),
      ]),
    });
    const outcome = await runAgentLoop({
      agent,
      run,
      state: fresh(),
      input: 'go',
      clock,
      cancellation: localRunCancellation(),
    });
    assert.equal(outcome.status, 'done');
    assert.deepEqual(JSON.parse(outcome.status === 'done' ? outcome.text : '[]'), [
      'ERR_TOOL_VALIDATION',
      'ERR_TOOL_UNKNOWN',
      'ERR_TOOL_VALIDATION',
      4,
    ]);
  });

  it('a model that returns garbage or throws fails the run with ERR_MODEL', async () => {
    for (const generate of [async () => ({ message: 42 }), async () => Promise.reject(new Error('down'))]) {
      const agent = defineAgent({ name: 'bad', instructions: '', model: { generate } as never });
      const outcome = await runAgentLoop({
        agent,
        run,
        state: fresh(),
        input: 'x',
        clock,
        cancellation: localRunCancellation(),
      });
      assert.equal(outcome.status, 'failed');
      assert.equal(outcome.status === 'failed' && (outcome.error as { code?: string }).code, 'ERR_MODEL');
    }
  });

  it('fails when every tool call fails for maxFailedTurns turns in a row', async () => {
    const failing = defineTool({
      name: 'f',
      description: '',
      parameters: z.object({}),
      retries: 0,
      execute: () => ToolResult.error('nope'),
    });
    const agent = defineAgent({
      name: 'stuck',
      instructions: '',
      tools: [failing],
      model: new ScriptedModel([{ toolCalls: [{ name: 'f' }] }], { whenExhausted: 'repeat-last' }),
    });
    const outcome = await runAgentLoop({
      agent,
      run,
      state: fresh(),
      input: 'x',
      clock,
      cancellation: localRunCancellation(),
      maxFailedTurns: 2,
    });
    assert.equal(outcome.status, 'failed');
    assert.match(outcome.status === 'failed' ? outcome.error.message : '', /could not recover.*nope/);
  });

  it('applies updates in call order after the turn, records events and the applied operations', async () => {
    const w = (name: string, v: number) =>
      defineTool({
        name,
        description: '',
        parameters: z.object({}),
        // The slower call finishes last but is applied in call order.
        execute: async () => {
          if (name === 'first') await Promise.resolve();
          return ToolResult.ok(v, ContextUpdate.empty().append('order', v).logEvent('wrote', { v }));
        },
      });
    const agent = defineAgent({
      name: 'writer',
      instructions: '',
      tools: [w('first', 1), w('second', 2)],
      model: new ScriptedModel([{ toolCalls: [{ name: 'first' }, { name: 'second' }] }, 'done']),
    });
    const outcome = await runAgentLoop({
      agent,
      run,
      state: fresh({ order: [0] }),
      input: 'x',
      clock,
      cancellation: localRunCancellation(),
    });
    assert.deepEqual(outcome.state.metadata, { order: [0, 1, 2] });
    assert.deepEqual(
      outcome.state.events.map((e) => [e.type, e.data.v, e.agentId]),
      [
        ['wrote', 1, 'agent_a'],
        ['wrote', 2, 'agent_a'],
      ],
    );
    assert.deepEqual(
      outcome.state.updates.map((o) => o.op),
      ['append', 'append'],
    );
  });

  it('stops with cancelled when the run is cancelled, with a result for every call', async () => {
    const source = new CancelSource();
    let started: () => void = () => {};
    const toolStarted = new Promise<void>((resolve) => {
      started = resolve;
    });
    const slow = defineTool({
      name: 'slow',
      description: '',
      parameters: z.object({}),
      timeoutMs: null,
      execute: async (_a, ctx) => {
        started();
        return new Promise((_resolve, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason)));
      },
    });
    const agent = defineAgent({
      name: 'c',
      instructions: '',
      tools: [slow],
      model: new ScriptedModel([{ toolCalls: [{ name: 'slow' }] }, 'never']),
    });
    const running = runAgentLoop({
      agent,
      run,
      state: fresh(),
      input: 'x',
      clock,
      cancellation: localRunCancellation(source),
    });
    await toolStarted;
    source.cancel('user');
    const outcome = await running;
    assert.equal(outcome.status, 'cancelled');
    assert.equal(outcome.status === 'cancelled' && outcome.reason, 'user');
    const last = outcome.state.messages.at(-1);
    assert.equal(last?.role, 'tool');
    assert.equal(last?.role === 'tool' && last.isError, true);
  });

  it('suspends on pending, keeps other results, and re-runs only the pending tool exactly once', async () => {
    let asks = 0;
    let okRuns = 0;
    const ask = defineTool({
      name: 'ask',
      description: '',
      parameters: z.object({}),
      execute: (_a, ctx) => {
        asks++;
        return ctx.answer === undefined
          ? ToolResult.pending({ kind: 'input', prompt: 'env?' })
          : `env=${String((ctx.answer.data as { env: string }).env)}`;
      },
    });
    const ok = defineTool({ name: 'ok', description: '', parameters: z.object({}), execute: () => ++okRuns });
    const agent = defineAgent({
      name: 'h',
      instructions: '',
      tools: [ask, ok],
      model: new ScriptedModel([
        { toolCalls: [{ name: 'ask' }, { name: 'ok' }] },
        ({ lastToolResults }) => JSON.stringify(lastToolResults.map((r) => r.content)),
      ]),
    });
    const first = await runAgentLoop({
      agent,
      run,
      state: fresh(),
      input: 'x',
      clock,
      cancellation: localRunCancellation(),
    });
    assert.equal(first.status, 'suspended');
    if (first.status !== 'suspended') return;
    assert.equal(first.request.kind, 'input');
    // The state crosses threads: it must survive a structured clone.
    const saved = structuredClone(first.state);
    const resumed = await runAgentLoop({
      agent,
      run,
      state: saved,
      answers: [{ answer: { id: first.request.id, ok: true, data: { env: 'prod' } }, expired: false }],
      clock,
      cancellation: localRunCancellation(),
    });
    assert.equal(resumed.status, 'done');
    assert.equal(resumed.status === 'done' && resumed.text, '["env=prod",1]');
    assert.equal(asks, 2);
    assert.equal(okRuns, 1);
  });

  it('declined and expired answers become error results without re-running the tool', async () => {
    // Expiry is the supervisor's call (one time base): it resumes the run with `expired`.
    for (const [answer, code, expiresAt, expired] of [
      [{ ok: false, reason: 'no' }, 'ERR_REQUEST_DECLINED', undefined, false],
      [{ ok: true }, 'ERR_REQUEST_EXPIRED', clock.now() - 1, true],
    ] as const) {
      let calls = 0;
      const ask = defineTool({
        name: 'ask',
        description: '',
        parameters: z.object({}),
        execute: () => {
          calls++;
          return ToolResult.pending({ kind: 'input', prompt: '?', ...(expiresAt === undefined ? {} : { expiresAt }) });
        },
      });
      const agent = defineAgent({
        name: 'h',
        instructions: '',
        tools: [ask],
        model: new ScriptedModel([
          { toolCalls: [{ name: 'ask' }] },
          ({ lastToolResults }) => String((lastToolResults[0]?.content as { code?: string } | undefined)?.code),
        ]),
      });
      const first = await runAgentLoop({
        agent,
        run,
        state: fresh(),
        input: 'x',
        clock,
        cancellation: localRunCancellation(),
      });
      assert.equal(first.status, 'suspended');
      if (first.status !== 'suspended') return;
      const resumed = await runAgentLoop({
        agent,
        run,
        state: first.state,
        answers: [{ answer: { id: first.request.id, ...answer }, expired }],
        clock,
        cancellation: localRunCancellation(),
      });
      assert.equal(resumed.status === 'done' && resumed.text, code);
      assert.equal(calls, 1);
    }
  });

  it('two tools suspending in one turn: the first is asked, then the second, then the turn completes', async () => {
    const q = (name: string) =>
      defineTool({
        name,
        description: '',
        parameters: z.object({}),
        execute: (_a, ctx) =>
          ctx.answer === undefined
            ? ToolResult.pending({ kind: 'input', prompt: name })
            : `${name}:${String(ctx.answer.data)}`,
      });
    const agent = defineAgent({
      name: 'two',
      instructions: '',
      tools: [q('a'), q('b')],
      model: new ScriptedModel([
        { toolCalls: [{ name: 'a' }, { name: 'b' }] },
        ({ lastToolResults }) => lastToolResults.map((r) => r.content).join('|'),
      ]),
    });
    const s1 = await runAgentLoop({
      agent,
      run,
      state: fresh(),
      input: 'x',
      clock,
      cancellation: localRunCancellation(),
    });
    assert.equal(s1.status === 'suspended' && s1.request.prompt, 'a');
    if (s1.status !== 'suspended') return;
    const s2 = await runAgentLoop({
      agent,
      run,
      state: s1.state,
      answers: [{ answer: { id: s1.request.id, ok: true, data: 1 }, expired: false }],
      clock,
      cancellation: localRunCancellation(),
    });
    assert.equal(s2.status === 'suspended' && s2.request.prompt, 'b');
    if (s2.status !== 'suspended') return;
    const done = await runAgentLoop({
      agent,
      run,
      state: s2.state,
      answers: [{ answer: { id: s2.request.id, ok: true, data: 2 }, expired: false }],
      clock,
      cancellation: localRunCancellation(),
    });
    assert.equal(done.status === 'done' && done.text, 'a:1|b:2');
    // No tool call is left without a result in the transcript.
    const calls = done.state.messages.flatMap((m) =>
      m.role === 'assistant' ? (m.toolCalls ?? []).map((c) => c.id) : [],
    );
    const results = done.state.messages.flatMap((m) => (m.role === 'tool' ? [m.toolCallId] : []));
    assert.deepEqual(results.sort(), calls.sort());
  });

  it('resumes with several answers at once: each answered call re-runs once with its own, in one resume; the rest stay open', async () => {
    const runs: string[] = [];
    const q = defineTool({
      name: 'q',
      description: '',
      parameters: z.object({ n: z.number() }),
      execute: ({ n }, ctx) => {
        runs.push(`${n}:${ctx.answer === undefined ? '-' : String(ctx.answer.data)}`);
        return ctx.answer === undefined
          ? ToolResult.pending({ kind: 'input', prompt: `q${n}` })
          : `q${n}=${String(ctx.answer.data)}`;
      },
    });
    const agent = defineAgent({
      name: 'many',
      instructions: '',
      tools: [q],
      model: new ScriptedModel([
        { toolCalls: [0, 1, 2, 3].map((n) => ({ name: 'q', arguments: { n } })) },
        ({ lastToolResults }) =>
          lastToolResults.map((r) => (r.isError ? (r.content as { code: string }).code : r.content)).join('|'),
      ]),
    });
    const first = await runAgentLoop({
      agent,
      run,
      state: fresh(),
      input: 'x',
      clock,
      cancellation: localRunCancellation(),
    });
    assert.equal(first.status, 'suspended');
    if (first.status !== 'suspended') return;
    const ids = (first.state.pending ?? []).map((p) => p.request?.id as string);
    runs.length = 0;
    // Calls 2, 0 and 3 answered (3 declined): call 1 stays open and the run suspends on it.
    const second = await runAgentLoop({
      agent,
      run,
      state: first.state,
      answers: [
        { answer: { id: ids[2] as string, ok: true, data: 'two' }, expired: false },
        { answer: { id: ids[0] as string, ok: true, data: 'zero' }, expired: false },
        { answer: { id: ids[3] as string, ok: false, reason: 'no' }, expired: false },
      ],
      clock,
      cancellation: localRunCancellation(),
    });
    assert.deepEqual(
      runs.sort(),
      ['0:zero', '2:two'],
      'each answered call ran once with its own answer; a declined one did not run',
    );
    assert.equal(second.status === 'suspended' && second.request.id, ids[1]);
    if (second.status !== 'suspended') return;
    // A second answer to a question answered already, or to no question of the run: refused before anything runs.
    for (const answers of [
      [
        { answer: { id: ids[1] as string, ok: true, data: 'one' }, expired: false },
        { answer: { id: ids[0] as string, ok: true, data: 'again' }, expired: false },
      ],
      [
        { answer: { id: ids[1] as string, ok: true, data: 'one' }, expired: false },
        { answer: { id: ids[1] as string, ok: true, data: 'twice' }, expired: false },
      ],
    ]) {
      runs.length = 0;
      const refused = await runAgentLoop({
        agent,
        run,
        state: second.state,
        answers,
        clock,
        cancellation: localRunCancellation(),
      });
      assert.equal(refused.status === 'failed' && (refused.error as { code?: string }).code, 'ERR_UNKNOWN_REQUEST');
      assert.deepEqual(runs, [], 'nothing re-ran');
    }
    const done = await runAgentLoop({
      agent,
      run,
      state: second.state,
      answers: [{ answer: { id: ids[1] as string, ok: true, data: 'one' }, expired: false }],
      clock,
      cancellation: localRunCancellation(),
    });
    assert.equal(done.status === 'done' && done.text, 'q0=zero|q1=one|q2=two|ERR_REQUEST_DECLINED');
  });

  it('refuses to resume with an answer to another request', async () => {
    const ask = defineTool({
      name: 'ask',
      description: '',
      parameters: z.object({}),
      execute: () => ToolResult.pending({ kind: 'input', prompt: '?' }),
    });
    const agent = defineAgent({
      name: 'h',
      instructions: '',
      tools: [ask],
      model: new ScriptedModel([{ toolCalls: [{ name: 'ask' }] }, 'x']),
    });
    const first = await runAgentLoop({
      agent,
      run,
      state: fresh(),
      input: 'x',
      clock,
      cancellation: localRunCancellation(),
    });
    const again = await runAgentLoop({
      agent,
      run,
      state: first.state,
      answers: [{ answer: { id: 'req_other', ok: true }, expired: false }],
      clock,
      cancellation: localRunCancellation(),
    });
    assert.equal(again.status, 'failed');
    assert.equal(again.status === 'failed' && (again.error as { code?: string }).code, 'ERR_UNKNOWN_REQUEST');
  });

  it('offers a task tool for declared subagents and delivers child events and merge-back updates', async () => {
    const child = defineAgent({
      name: 'child',
      module: 'file:///child.js',
      instructions: '',
      model: ScriptedModel.answering('x'),
    });
    const spawned: string[] = [];
    const spawner: TaskSpawner = {
      async runTask(request) {
        spawned.push(`${request.subagent.name}:${request.instructions}:${JSON.stringify(request.metadata)}`);
        return {
          status: 'done',
          result: 'child says hi',
          updates: [{ op: 'set', key: 'fromChild', value: 1 }],
          events: [{ type: 'child_event', data: {}, agentId: 'agent_a-sub-1' as AgentId, at: 0 }],
        };
      },
    };
    const agent = defineAgent({
      name: 'parent',
      instructions: '',
      subagents: [child],
      mergeMetadataFrom: ['child'],
      model: new ScriptedModel([
        { toolCalls: [{ name: 'task', arguments: { subagent: 'child', instructions: 'do' } }] },
        ({ lastToolResults }) => String(lastToolResults[0]?.content),
      ]),
    });
    const outcome = await runAgentLoop({
      agent,
      run,
      state: fresh({ m: 1 }),
      input: 'x',
      clock,
      cancellation: localRunCancellation(),
      spawner,
    });
    assert.equal(outcome.status === 'done' && outcome.text, 'child says hi');
    assert.deepEqual(spawned, ['child:do:{"m":1}']);
    assert.deepEqual(outcome.state.metadata, { m: 1, fromChild: 1 });
    assert.deepEqual(
      outcome.state.events.map((e) => [e.type, e.agentId]),
      [['child_event', 'agent_a-sub-1']],
    );
    // The task tool is not offered without a spawner.
    assert.equal(createTaskTool([child], spawner, () => {}).name, 'task');
  });
});
