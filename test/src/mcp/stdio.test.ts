// @troupe/mcp against a real MCP server (fixtures/server.ts, built with the
// official SDK) that each thread starts as a child process and talks to over
// stdio: its tools listed as Troupe tools, called from subagents on worker
// threads, their results and errors as the model sees them, a cancel and a
// deadline the server hears of, a server that dies in the middle of a call,
// approval, and where the connection lives.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { ApprovalRequest } from '@troupe/core';
import { createSupervisor, type Supervisor } from '@troupe/supervisor';
import { OBSERVER_VARIABLE, plan, seen } from './callerModel.js';
import { Observer } from './Observer.js';

describe('MCP tools over stdio', { timeout: 60_000 }, () => {
  let observer: Observer;
  let supervisor: Supervisor;
  let agents: typeof import('./mcpAgents.js');
  const approvals: ApprovalRequest[] = [];

  before(async () => {
    observer = await Observer.start();
    // Before the module is imported here and before the pool's workers start (they copy the environment).
    process.env[OBSERVER_VARIABLE] = observer.address;
    agents = await import('./mcpAgents.js');
    supervisor = createSupervisor({
      pool: { threads: 1 },
      approval: (request) => {
        approvals.push(request);
        return { decision: 'reject', reason: 'not in tests' };
      },
    });
  });
  after(async () => {
    await supervisor?.destroy();
    await agents?.stdioServer.close();
    delete process.env[OBSERVER_VARIABLE];
    await observer?.close();
  });

  const run = async (input: string, signal?: AbortSignal) => {
    const outcome = await supervisor.spawn(agents.stdioCaller, {
      input,
      scope: {},
      ...(signal === undefined ? {} : { signal }),
    });
    return outcome;
  };

  it("lists the server's tools: the model sees each one's JSON Schema as the server wrote it, named as Troupe names tools", async () => {
    const listed = await agents.stdioServer.listTools();
    const tools = agents.stdioCaller.tools;
    assert.deepEqual(
      tools.map((t) => t.name),
      listed.map((t) => t.name.replace('.', '_')),
    );
    assert.ok(
      tools.some((t) => t.name === 'notes_read'),
      'a name with a dot is made a valid tool name',
    );
    for (const t of listed) {
      const tool = tools.find((x) => x.name === t.name.replace('.', '_'));
      const { $schema: _, ...schema } = t.inputSchema as Record<string, unknown>;
      assert.deepEqual(tool?.spec.parameters, schema, `${t.name}: the spec is the server's schema`);
      assert.equal(tool?.spec.description, t.description);
    }
    const echo = tools.find((t) => t.name === 'echo');
    assert.deepEqual(echo?.spec.parameters.required, ['text']);
    assert.equal(tools.find((t) => t.name === 'hang')?.timeoutMs, 400);
    assert.equal(tools.find((t) => t.name === 'slow')?.timeoutMs, null);
    assert.equal(echo?.requiresApproval, false);
    assert.equal(echo?.retries, 0, 'a call that may have side effects is not retried unless said');
  });

  it('calls from a worker: text, structured content and mixed content as the model sees them', async () => {
    observer.reset();
    const outcome = await run(
      plan({ tool: 'echo', args: { text: 'hi' } }, { tool: 'add', args: { a: 2, b: 40 } }, { tool: 'picture' }),
    );
    assert.equal(outcome.status, 'done', JSON.stringify(outcome));
    const results = seen(outcome.status === 'done' ? outcome.result : '');
    assert.deepEqual(results, [
      { name: 'echo', isError: false, content: 'echo: hi' },
      { name: 'add', isError: false, content: { sum: 42 } },
      {
        name: 'picture',
        isError: false,
        content: [
          { type: 'text', text: 'a red dot' },
          { type: 'image', data: 'iVBORw0KGgo=', mimeType: 'image/png' },
        ],
      },
    ]);
    const call = await observer.next((e) => e.event === 'call' && e.tool === 'echo');
    assert.notEqual(call.pid, process.pid, 'the server is a process of its own');
  });

  it('errors: a tool that reports one (ERR_TOOL_FAILED), and arguments its schema refuses, which never reach the server', async () => {
    observer.reset();
    const outcome = await run(
      plan({ tool: 'fail' }, { tool: 'echo', args: { text: '' } }, { tool: 'echo', args: { text: 'ok' } }),
    );
    assert.equal(outcome.status, 'done', JSON.stringify(outcome));
    const [fail, refused, ok] = seen(outcome.status === 'done' ? outcome.result : '');
    assert.deepEqual(fail, {
      name: 'fail',
      isError: true,
      content: { error: 'the disk is full', code: 'ERR_TOOL_FAILED' },
    });
    assert.equal(refused?.isError, true);
    assert.equal(refused?.content.code, 'ERR_TOOL_VALIDATION');
    assert.match(refused?.content.error, /text/);
    assert.deepEqual(ok, { name: 'echo', isError: false, content: 'echo: ok' });
    // The run's last call reached the server; the refused one never did.
    await observer.next((e) => e.event === 'call' && e.tool === 'echo');
    assert.equal(observer.events.filter((e) => e.event === 'call' && e.tool === 'echo').length, 1);
  });

  it('a cancel in the middle of a call: the server receives notifications/cancelled for that request, the run ends cancelled', async () => {
    observer.reset();
    const controller = new AbortController();
    const outcome = run(plan({ tool: 'slow' }), controller.signal);
    const call = await observer.next((e) => e.event === 'call' && e.tool === 'slow');
    controller.abort();
    const ended = await outcome;
    assert.equal(ended.status, 'cancelled', JSON.stringify(ended));
    const cancelled = await observer.next((e) => e.event === 'cancelled');
    assert.equal(cancelled.requestId, call.requestId, 'the cancellation names the call in flight');
    assert.equal(cancelled.pid, call.pid);
  });

  it('a server that never answers: the deadline ends the call (ToolTimeoutError), the server is told, the run goes on', async () => {
    observer.reset();
    const outcome = await run(plan({ tool: 'hang' }, { tool: 'echo', args: { text: 'after' } }));
    assert.equal(outcome.status, 'done', JSON.stringify(outcome));
    const [hang, echo] = seen(outcome.status === 'done' ? outcome.result : '');
    assert.equal(hang?.isError, true);
    assert.equal(hang?.content.code, 'ERR_TOOL_TIMEOUT');
    assert.match(hang?.content.error, /"hang" timed out after 400 ms/);
    assert.deepEqual(echo, { name: 'echo', isError: false, content: 'echo: after' });
    const call = await observer.next((e) => e.event === 'call' && e.tool === 'hang');
    const cancelled = await observer.next((e) => e.event === 'cancelled' && e.tool === 'hang');
    assert.equal(cancelled.requestId, call.requestId);
  });

  it('a server that dies in the middle of a call: an ERR_MCP_CONNECTION error the model sees, the run goes on, the next call starts it again', async () => {
    observer.reset();
    const outcome = await run(plan({ tool: 'pid' }, { tool: 'die' }, { tool: 'pid' }));
    assert.equal(outcome.status, 'done', JSON.stringify(outcome));
    const [before, died, after] = seen(outcome.status === 'done' ? outcome.result : '');
    assert.equal(died?.isError, true);
    assert.equal(died?.content.code, 'ERR_MCP_CONNECTION');
    assert.match(
      died?.content.error,
      /went away during the call of "die".*not retried; the next call starts a new connection/,
    );
    assert.match(died?.content.error, /fatal: the test asked this server to die/, 'its last stderr line says why');
    const dying = await observer.next((e) => e.event === 'dying');
    assert.equal(before?.content.pid, dying.pid);
    assert.ok(
      typeof after?.content.pid === 'number' && after.content.pid !== before?.content.pid,
      'a new server process',
    );
  });

  it("requiresApproval: the host's handler is asked first, and a refused call never reaches the server", async () => {
    observer.reset();
    approvals.length = 0;
    const outcome = await supervisor.spawn(agents.approvalCaller, {
      input: plan({ tool: 'echo', args: { text: 'secret' } }, { tool: 'pid' }),
      scope: {},
    });
    assert.equal(outcome.status, 'done', JSON.stringify(outcome));
    const [echo, pid] = seen(outcome.status === 'done' ? outcome.result : '');
    assert.equal(echo?.content.code, 'ERR_APPROVAL_DENIED');
    assert.deepEqual(
      approvals.map((a) => [a.toolName, a.arguments]),
      [['echo', { text: 'secret' }]],
    );
    assert.equal(pid?.isError, false);
    await observer.next((e) => e.event === 'call' && e.tool === 'pid');
    assert.equal(observer.events.filter((e) => e.tool === 'echo').length, 0);
  });

  it("one connection per thread: a worker reuses its own, which is not the host thread's", async () => {
    const first = await run(plan({ tool: 'pid' }));
    const second = await run(plan({ tool: 'pid' }));
    const pidOf = (o: typeof first): number => seen(o.status === 'done' ? o.result : '')[0]?.content.pid;
    assert.equal(pidOf(first), pidOf(second), 'the worker keeps its connection between runs');
    // A parent agent runs on this thread, with this thread's connection.
    const parent = await supervisor.startAgent(agents.stdioCaller, { scope: {} });
    const reply = await parent.send(plan({ tool: 'pid' }));
    assert.equal(reply.status, 'done', JSON.stringify(reply));
    const host = seen(reply.status === 'done' ? reply.text : '')[0]?.content.pid;
    assert.ok(typeof host === 'number' && host !== pidOf(first), `host ${host}, worker ${pidOf(first)}`);
  });
});
