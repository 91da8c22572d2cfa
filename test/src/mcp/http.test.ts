// @troupe/mcp against the same real MCP server over Streamable HTTP on
// 127.0.0.1 (a child process of the test): listing, a call and an error from
// a worker, a cancel and a deadline the server hears of (its cancellation is
// a request of its own, sent before the worker's thread is let go), and a
// server that dies in the middle of a call.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createSupervisor, type Supervisor } from '@troupe/supervisor';
import { OBSERVER_VARIABLE, plan, seen } from './callerModel.js';
import { HttpServerProcess } from './HttpServerProcess.js';
import { Observer } from './Observer.js';

describe('MCP tools over Streamable HTTP', { timeout: 60_000 }, () => {
  let observer: Observer;
  let server: HttpServerProcess;
  let supervisor: Supervisor;
  let agents: typeof import('./mcpHttpAgents.js');

  before(async () => {
    observer = await Observer.start();
    server = await HttpServerProcess.start({ TROUPE_MCP_OBSERVER: observer.address });
    process.env[OBSERVER_VARIABLE] = observer.address;
    // The URL is read when the module is imported, here and in each worker (which copies the environment).
    process.env.TROUPE_TEST_MCP_URL = server.url;
    agents = await import('./mcpHttpAgents.js');
    supervisor = createSupervisor({ pool: { threads: 1 } });
  });
  after(async () => {
    await supervisor?.destroy();
    await agents?.httpServer.close();
    await server?.stop();
    delete process.env.TROUPE_TEST_MCP_URL;
    delete process.env[OBSERVER_VARIABLE];
    await observer?.close();
  });

  const run = (input: string, signal?: AbortSignal) =>
    supervisor.spawn(agents.httpCaller, { input, scope: {}, ...(signal === undefined ? {} : { signal }) });

  it('lists the tools with their JSON Schemas', async () => {
    const listed = await agents.httpServer.listTools();
    assert.deepEqual(
      agents.httpCaller.tools.map((t) => t.name),
      listed.map((t) => t.name.replace('.', '_')),
    );
    const add = agents.httpCaller.tools.find((t) => t.name === 'add');
    assert.deepEqual(add?.spec.parameters.required, ['a', 'b']);
  });

  it('a call and an error from a worker', async () => {
    observer.reset();
    const outcome = await run(plan({ tool: 'add', args: { a: 1, b: 2 } }, { tool: 'fail' }));
    assert.equal(outcome.status, 'done', JSON.stringify(outcome));
    assert.deepEqual(seen(outcome.status === 'done' ? outcome.result : ''), [
      { name: 'add', isError: false, content: { sum: 3 } },
      { name: 'fail', isError: true, content: { error: 'the disk is full', code: 'ERR_TOOL_FAILED' } },
    ]);
  });

  it('a cancel in the middle of a call: the server receives notifications/cancelled for that request', async () => {
    observer.reset();
    const controller = new AbortController();
    const outcome = run(plan({ tool: 'slow' }), controller.signal);
    const call = await observer.next((e) => e.event === 'call' && e.tool === 'slow');
    controller.abort();
    assert.equal((await outcome).status, 'cancelled');
    const cancelled = await observer.next((e) => e.event === 'cancelled');
    assert.equal(cancelled.requestId, call.requestId);
  });

  it('a server that never answers: the deadline ends the call, the server is told, the run goes on', async () => {
    observer.reset();
    const outcome = await run(plan({ tool: 'hang' }, { tool: 'echo', args: { text: 'on' } }));
    assert.equal(outcome.status, 'done', JSON.stringify(outcome));
    const [hang, echo] = seen(outcome.status === 'done' ? outcome.result : '');
    assert.equal(hang?.content.code, 'ERR_TOOL_TIMEOUT');
    assert.deepEqual(echo, { name: 'echo', isError: false, content: 'echo: on' });
    const call = await observer.next((e) => e.event === 'call' && e.tool === 'hang');
    assert.equal((await observer.next((e) => e.event === 'cancelled' && e.tool === 'hang')).requestId, call.requestId);
  });

  // Last: the server is gone after it.
  it('a server that dies in the middle of a call: ERR_MCP_CONNECTION at once (not at the deadline), and the run goes on', async () => {
    observer.reset();
    const outcome = await run(plan({ tool: 'die' }, { tool: 'echo', args: { text: 'anyone?' } }));
    assert.equal(outcome.status, 'done', JSON.stringify(outcome));
    const [died, echo] = seen(outcome.status === 'done' ? outcome.result : '');
    assert.equal(died?.content.code, 'ERR_MCP_CONNECTION');
    assert.match(died?.content.error, /went away during the call of "die"/);
    // Nothing to start again over HTTP: the next call says it cannot reach the server.
    assert.equal(echo?.content.code, 'ERR_MCP_CONNECTION');
    assert.match(
      echo?.content.error,
      /cannot reach the MCP server "fixture-http" at http:\/\/127\.0\.0\.1:\d+\/mcp \(ECONNREFUSED\)/,
    );
    assert.equal(await server.exited, 3);
  });
});
