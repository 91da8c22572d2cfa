// A model configured at run time (issue 32, item 4): an agent whose model is a
// factory gets it made on the thread that runs the agent, at its first use
// there, from the environment as it is then — here a server's address set
// after the supervisor and its worker started and after the agents' module was
// imported (statically, at the top of this file). Made once per thread; a
// factory that throws fails the run with ERR_MODEL_FACTORY, saying what to do,
// and is called again by the next run.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { threadId } from 'node:worker_threads';
import { defineAgent, isTroupeError, type ModelStartEvent } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import { createSupervisor, type Supervisor } from '@troupe/supervisor';
import {
  asyncFactory,
  FACTORY_URL_VARIABLE,
  factoryCalls,
  factoryChild,
  factoryParent,
  notAModel,
  rejecting,
} from '../fixtures/agents/modelFactory.js';
import { ChatServer, type Handler, sse, textAnswer } from '../openai/chatServer.js';

/** An answer that calls one tool. */
function callTool(name: string, args: unknown): Handler {
  return sse([
    {
      choices: [
        {
          index: 0,
          delta: {
            tool_calls: [{ index: 0, id: `call_${name}`, function: { name, arguments: JSON.stringify(args) } }],
          },
        },
      ],
    },
    { choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] },
  ]);
}

/** The failure a reply or an outcome carries, asserted to be the factory's typed error. */
function factoryError(value: { status: string; error?: Error }): Error {
  assert.equal(value.status, 'failed', JSON.stringify(value));
  const error = value.error as Error;
  assert.ok(isTroupeError(error, 'ERR_MODEL_FACTORY'), String(error));
  return error;
}

describe('a model factory', () => {
  let server: ChatServer;
  let supervisor: Supervisor;
  before(async () => {
    delete process.env[FACTORY_URL_VARIABLE];
    server = await ChatServer.start();
    supervisor = createSupervisor({ persistence: null, pool: { threads: 1 } });
    // The worker is up, with the environment as it was: without the variable.
    await supervisor.ready();
  });
  after(async () => {
    await supervisor.destroy();
    delete process.env[FACTORY_URL_VARIABLE];
    await server.close();
  });

  it('that throws fails the run with ERR_MODEL_FACTORY naming the agent, the factory and what to do, on either thread', async () => {
    const spawned = await supervisor.spawn(factoryChild, { input: 'which thread?', scope: {} });
    const inWorker = factoryError(spawned);
    assert.match(inWorker.message, /^agent "factory_child": its model factory fromEnvironment\(\) threw: /);
    assert.match(inWorker.message, new RegExp(`${FACTORY_URL_VARIABLE} is not set`));
    assert.match(inWorker.message, /reads that thread's environment as it is then: fix what it reads/);
    assert.match(inWorker.message, /the next run calls it again/);
    const parent = await supervisor.startAgent(factoryParent, { scope: {} });
    const reply = await parent.send('delegate');
    const onMain = factoryError(reply);
    assert.match(onMain.message, /^agent "factory_parent": its model factory fromEnvironment\(\) threw: /);
    assert.equal(server.received.length, 0, 'no model was made, nothing was sent');
  });

  it('reads the environment as it is at the first use, on the supervisor thread and in the worker', async () => {
    // Set now: after the supervisor, its worker and the agents' module.
    process.env[FACTORY_URL_VARIABLE] = server.baseURL;
    server.reset();
    server.script(
      callTool('task', { subagent: 'factory_child', instructions: 'which thread?' }),
      callTool('factory_thread', {}),
      (res, received) => {
        const result = (received.body.messages as { role: string; content: string }[]).find((m) => m.role === 'tool');
        return textAnswer(result?.content ?? 'no result')(res, received);
      },
      (res, received) => {
        const result = (received.body.messages as { role: string; content: string }[]).find((m) => m.role === 'tool');
        return textAnswer(result?.content ?? 'no result')(res, received);
      },
    );
    const starts: ModelStartEvent[] = [];
    const onStart = (e: ModelStartEvent): void => {
      starts.push(e);
    };
    supervisor.on('model.start', onStart);
    const parent = await supervisor.startAgent(factoryParent, { scope: {} });
    const reply = await parent.send('delegate');
    supervisor.off('model.start', onStart);
    assert.equal(reply.status, 'done', JSON.stringify(reply));
    assert.equal(server.received.length, 4);
    for (const r of server.received) {
      assert.equal(r.body.model, 'factory-model');
      assert.equal(r.headers.authorization, 'Bearer sk-factory');
    }
    const child = JSON.parse(reply.status === 'done' ? reply.text : '{}') as { thread: number; calls: number };
    assert.notEqual(child.thread, threadId, 'the child ran in a worker');
    // The worker called its factory twice: the failed run above, and this one.
    assert.equal(child.calls, 2);
    // The model was made before the first turn's events: they name it, on both threads.
    assert.deepEqual(
      starts.map((e) => [e.model, e.turn]),
      [
        ['factory-model', 1],
        ['factory-model', 1],
        ['factory-model', 2],
        ['factory-model', 2],
      ],
    );
  });

  it('is called once per thread: later runs keep the model it made', async () => {
    const before = factoryCalls.n;
    server.reset();
    server.script(textAnswer('one'), callTool('factory_thread', {}), (res, received) => {
      const result = (received.body.messages as { role: string; content: string }[]).find((m) => m.role === 'tool');
      return textAnswer(result?.content ?? 'no result')(res, received);
    });
    const parent = await supervisor.startAgent(factoryParent, { scope: {} });
    assert.equal((await parent.send('answer')).status, 'done');
    assert.equal(factoryCalls.n, before, 'the supervisor thread made its model once, for the first message');
    const outcome = await supervisor.spawn(factoryChild, { input: 'which thread?', scope: {} });
    assert.equal(outcome.status, 'done', JSON.stringify(outcome));
    const child = JSON.parse(outcome.status === 'done' ? outcome.result : '{}') as { calls: number };
    assert.equal(child.calls, 2, 'the worker kept the model of its second call');
  });

  it('may be async; a rejection or something that is not a model is ERR_MODEL_FACTORY too', async () => {
    const made = await supervisor.spawn(asyncFactory, { input: 'hi', scope: {} });
    assert.equal(made.status, 'done', JSON.stringify(made));
    assert.match(made.status === 'done' ? made.result : '', /^made on thread [1-9]/);
    const rejected = factoryError(await supervisor.spawn(rejecting, { input: 'hi', scope: {} }));
    assert.match(rejected.message, /^agent "rejecting": its model factory rejected: the secret store is down — /);
    const half = factoryError(await supervisor.spawn(notAModel, { input: 'hi', scope: {} }));
    assert.match(
      half.message,
      /^agent "not_a_model": its model factory returned an object, not a model: return an object with generate/,
    );
  });

  it('defineAgent refuses a model that is neither a model nor a factory, saying both', () => {
    assert.throws(
      () => defineAgent({ name: 'nothing', instructions: '', model: 42 as never }),
      (error: unknown) =>
        isTroupeError(error, 'ERR_INVALID_ARGUMENT') &&
        /model must implement generate\(\{ messages, tools, signal \}\), or be a function that returns such a model \(a model factory/.test(
          (error as Error).message,
        ),
    );
    // A model object with generate is a model, even when callable: never taken for a factory.
    const callable = Object.assign(() => undefined, { generate: ScriptedModel.answering('x').generate });
    const agent = defineAgent({ name: 'callable', instructions: '', model: callable });
    assert.equal(agent.model, callable);
  });
});
