// Structured output (issue 32, item 3): an agent's `output` schema is asked of
// its model, its final answer is parsed and checked by the loop, a mismatch
// goes back to the model a bounded number of times, and the schema's result is
// the reply's `output` — across the worker boundary, up to a parent's model
// through its `task` call, and saved with the run. Real worker threads,
// ScriptedModels; every wait is on an outcome or an event.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { defineAgent, defineTool, isTroupeError, OUTPUT_NAME } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import { sqlitePersistence } from '@troupe/sqlite';
import { createSupervisor, type PersistenceAdapter, type Supervisor } from '@troupe/supervisor';
import { z } from 'zod';
import { tempDir } from '../persistence/sqliteFiles.js';
import { corrected, forecaster, stubborn, type Weather, weather } from './outputAgents.js';

const scope = Object.freeze({ userId: 'u1' });

describe('structured output', () => {
  // A durable store: it saves every run of a conversation, with its outcome.
  const dir = tempDir('output');
  let store: PersistenceAdapter & { close(): Promise<void> };
  let supervisor: Supervisor;
  before(async () => {
    store = sqlitePersistence({ file: `${dir.dir}/output.sqlite` });
    supervisor = createSupervisor({ pool: { threads: 2 }, persistence: store });
    await supervisor.ready();
  });
  after(async () => {
    await supervisor.destroy();
    await store.close();
    dir.remove();
  });

  it('a subagent on a worker answers with its schema’s result (defaults applied)', async () => {
    const runs: string[] = [];
    const onDone = (e: { runId: string }) => runs.push(e.runId);
    supervisor.on('subagent.done', onDone);
    try {
      const outcome = await supervisor.spawn(weather, { input: 'Oslo?', scope });
      assert.equal(outcome.status, 'done', JSON.stringify(outcome));
      if (outcome.status !== 'done') return;
      // The model saw the request's output spec (else it would have answered in text).
      assert.deepEqual(outcome.output, { city: 'Oslo', tempC: 4, unit: 'C' });
      assert.equal(outcome.result, '{"city":"Oslo","tempC":4}', 'the text is the answer as the model wrote it');
      assert.equal(outcome.turns, 1);
      assert.deepEqual(runs, [outcome.runId]);
    } finally {
      supervisor.off('subagent.done', onDone);
    }
  });

  it('a parent’s model sees its subagent’s output as data (the subagent’s own from its child, over the host channel); each run saves its output with its outcome', async () => {
    const seen: unknown[] = [];
    const trip = defineAgent({
      name: 'trip',
      instructions: 'Plan the trip.',
      subagents: [forecaster],
      model: new ScriptedModel([
        { toolCalls: [{ name: 'task', arguments: { subagent: 'forecaster', instructions: 'Oslo?' } }] },
        ({ lastToolResults }) => {
          const content = lastToolResults[0]?.content as { from: z.output<typeof Weather> };
          seen.push(content);
          return { output: { destination: content.from.city, pack: content.from.tempC < 10 ? 'a coat' : 'a hat' } };
        },
      ]),
      output: z.object({ destination: z.string(), pack: z.string() }),
    });
    const runs: string[] = [];
    const onDone = (e: { runId: string }) => runs.push(e.runId);
    supervisor.on('agent.done', onDone);
    supervisor.on('subagent.done', onDone);
    try {
      const handle = await supervisor.startAgent(trip, { scope });
      const reply = await handle.send('Where to, and what to pack?');
      assert.equal(reply.status, 'done', JSON.stringify(reply));
      if (reply.status !== 'done') return;
      const forecast = { forecast: 'Oslo: 4 °C', from: { city: 'Oslo', tempC: 4, unit: 'C' } };
      assert.deepEqual(seen, [forecast], 'the child’s output, as an object');
      assert.deepEqual(reply.output, { destination: 'Oslo', pack: 'a coat' });
      // The runs a durable store saved (those that reached a checkpoint: the message and the
      // forecaster, which made a call) hold their output with their outcome.
      assert.equal(runs.length, 3, 'trip, forecaster, weather');
      const saved = await Promise.all(runs.map((runId) => store.getRun(scope, runId)));
      const outputs = Object.fromEntries(
        saved.map((r) => [r?.agentName, (r?.outcome as { output?: unknown } | undefined)?.output]),
      );
      assert.deepEqual(outputs.trip, { destination: 'Oslo', pack: 'a coat' });
      assert.deepEqual(outputs.forecaster, forecast);
      await handle.stop();
    } finally {
      supervisor.off('agent.done', onDone);
      supervisor.off('subagent.done', onDone);
    }
  });

  it('an answer that does not match goes back to the model with the path, once, then passes', async () => {
    const outcome = await supervisor.spawn(corrected, { input: 'Oslo?', scope });
    assert.equal(outcome.status, 'done', JSON.stringify(outcome));
    if (outcome.status !== 'done') return;
    assert.equal(outcome.turns, 2, 'two answers');
    const { told, ...rest } = outcome.output as { told: string };
    assert.deepEqual(rest, { city: 'Oslo', tempC: 4, unit: 'C' });
    assert.match(told, /^Your answer does not match the required output: at output\.city: /);
    assert.match(told, /expected string, received number/);
  });

  it('an answer that never matches fails the run with ERR_OUTPUT_INVALID naming the path, after outputRetries', async () => {
    const outcome = await supervisor.spawn(stubborn, { input: 'The order?', scope });
    assert.equal(outcome.status, 'failed', JSON.stringify(outcome));
    if (outcome.status !== 'failed') return;
    assert.ok(isTroupeError(outcome.error, 'ERR_OUTPUT_INVALID'), String(outcome.error));
    assert.match(outcome.error.message, /\(3 answers\): at output\.items\[1\]\.price: /);
    assert.equal(outcome.turns, 3, 'the first answer and its 2 retries (the default)');
  });
});

describe('structured output in the loop (on the supervisor thread)', () => {
  let supervisor: Supervisor;
  before(() => {
    supervisor = createSupervisor({ persistence: null });
  });
  after(() => supervisor.destroy());

  /** A parent agent whose model gives `answers` in turn (the last one again past the end), and its replies. */
  async function ask(answers: readonly string[], options: { output?: z.ZodType; outputRetries?: number } = {}) {
    const requests: unknown[] = [];
    const agent = defineAgent({
      name: 'asked',
      instructions: 'Answer.',
      model: new ScriptedModel(
        answers.map((text) => ({ output }) => {
          requests.push(output);
          return text;
        }),
        { whenExhausted: 'repeat-last' },
      ),
      output: options.output ?? z.object({ n: z.number() }),
      ...(options.outputRetries === undefined ? {} : { outputRetries: options.outputRetries }),
    });
    const handle = await supervisor.startAgent(agent, { scope });
    const reply = await handle.send('n?');
    const messages = handle.snapshot().messages;
    await handle.stop();
    return { reply, messages, requests };
  }

  it('asks every model call for the output spec: its name and the JSON Schema of what the schema reads', async () => {
    const { reply, requests } = await ask(['{"n":1}'], { output: z.object({ n: z.number().default(0) }) });
    assert.equal(reply.status, 'done');
    assert.deepEqual(reply.status === 'done' && reply.output, { n: 1 });
    const [spec] = requests as { name: string; schema: { properties: unknown; required?: unknown } }[];
    assert.equal(spec?.name, OUTPUT_NAME);
    // The input side: `n` has a default, so a model may leave it out.
    assert.deepEqual(spec?.schema.properties, { n: { type: 'number', default: 0 } });
    assert.equal(spec?.schema.required, undefined);
  });

  it('an answer that is not JSON goes back as such', async () => {
    const { reply, messages } = await ask(['n is 1', '{"n":1}']);
    assert.equal(reply.status, 'done');
    const told = messages.filter((m) => m.role === 'user').map((m) => m.content);
    assert.equal(told.length, 2);
    assert.match(told[1] ?? '', /^Your answer does not match the required output: the answer is not JSON \(/);
  });

  it('outputRetries: 0 fails at the first mismatch', async () => {
    const { reply, requests } = await ask(['{"n":"one"}', '{"n":1}'], { outputRetries: 0 });
    assert.equal(reply.status, 'failed');
    if (reply.status !== 'failed') return;
    assert.ok(isTroupeError(reply.error, 'ERR_OUTPUT_INVALID'));
    assert.match(reply.error.message, /\(1 answer\): at output\.n: /);
    assert.equal(requests.length, 1);
  });

  it('a schema whose result is not JSON fails the run at once with ERR_NOT_JSON (the model cannot fix it)', async () => {
    const { reply, requests } = await ask(['{"when":"2026-01-02"}'], {
      output: z.object({ when: z.string().transform((s) => new Date(s)) }),
    });
    assert.equal(reply.status, 'failed');
    if (reply.status !== 'failed') return;
    assert.ok(isTroupeError(reply.error, 'ERR_NOT_JSON'), String(reply.error));
    assert.match(reply.error.message, /a Date at output\.when/);
    assert.equal(requests.length, 1);
  });

  it('an agent without output: no spec asked, no output in the reply', async () => {
    const requests: unknown[] = [];
    const plain = defineAgent({
      name: 'plain',
      instructions: 'Answer.',
      model: new ScriptedModel([
        ({ output }) => {
          requests.push(output);
          return 'not JSON, and fine';
        },
      ]),
    });
    const handle = await supervisor.startAgent(plain, { scope });
    const reply = await handle.send('hi');
    await handle.stop();
    assert.equal(reply.status, 'done');
    assert.deepEqual(requests, [undefined]);
    assert.equal('output' in reply, false);
  });
});

describe('defineAgent({ output }) checks', () => {
  const model = new ScriptedModel(['{}']);
  it('output must be a zod schema', () => {
    assert.throws(
      () => defineAgent({ name: 'a', instructions: '', model, output: { type: 'object' } as never }),
      (e: unknown) => isTroupeError(e, 'ERR_INVALID_ARGUMENT') && /output must be a zod schema/.test(String(e)),
    );
  });
  it('outputRetries must be an integer from 0 to 100', () => {
    for (const outputRetries of [-1, 1.5, 101, Number.NaN]) {
      assert.throws(
        () => defineAgent({ name: 'a', instructions: '', model, output: z.object({}), outputRetries }),
        (e: unknown) => isTroupeError(e, 'ERR_INVALID_ARGUMENT') && /outputRetries must be an integer/.test(String(e)),
      );
    }
  });
  it('an agent with output cannot have a tool named like the final-answer tool', () => {
    const tool = defineTool({ name: OUTPUT_NAME, description: '', parameters: z.object({}), execute: () => 1 });
    assert.throws(
      () => defineAgent({ name: 'a', instructions: '', model, tools: [tool], output: z.object({}) }),
      (e: unknown) => isTroupeError(e, 'ERR_INVALID_ARGUMENT') && /rename your tool/.test(String(e)),
    );
    // Without output the name is free.
    assert.ok(defineAgent({ name: 'a', instructions: '', model, tools: [tool] }));
  });
  it('the output spec is made once per agent', () => {
    const agent = defineAgent({ name: 'a', instructions: '', model, output: z.object({ x: z.string() }) });
    assert.equal(agent.output?.spec, agent.output?.spec);
    assert.equal(agent.output?.retries, 2);
    assert.ok(Object.isFrozen(agent.output?.spec.schema));
  });
});
