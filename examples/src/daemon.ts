// A long-running process holding one supervisor: a tiny HTTP API on loopback,
// no dependencies beyond node:http.
//
//   node examples/dist/daemon.js
//   curl -s localhost:<port>/tasks -d '{"tenantId":"acme","userId":"u-1","message":"analyst: checkout"}'
//   curl -s localhost:<port>/health
//   kill -TERM <pid>
//
// POST /tasks starts a coordinator for the request, sends it the message (lines
// `<subagent>: <instructions>`), answers with its reply and stops it.
// SIGTERM or SIGINT: stop accepting connections, `supervisor.close({ timeoutMs })`
// (refuse new work, let in-flight runs finish, cancel what still runs at the
// timeout, resolve once every worker exited), then let the event loop drain:
// the process exits 0 on its own. A second signal tears down at once.
//
// Environment: PORT (default 0: any free port, printed on the ready line),
// TROUPE_THREADS (default 2), TROUPE_CLOSE_TIMEOUT_MS (default 10000).
import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { isTroupeError } from '@troupe/core';
import { createSupervisor } from '@troupe/supervisor';
import { coordinator } from './agents/coordinator.js';
import { TenantScope } from './scope.js';

const port = Number(process.env.PORT ?? 0);
const threads = Number(process.env.TROUPE_THREADS ?? 2);
const closeTimeoutMs = Number(process.env.TROUPE_CLOSE_TIMEOUT_MS ?? 10_000);
const MAX_BODY_BYTES = 64 * 1024;

const started = performance.now();
function log(message: string): void {
  process.stdout.write(`daemon +${Math.round(performance.now() - started)}ms ${message}\n`);
}

const supervisor = createSupervisor({
  scope: TenantScope,
  pool: { threads },
  // This API has no person to ask: a tool that needs approval is refused.
  approval: () => ({ decision: 'reject', reason: 'the HTTP API approves nothing' }),
});

// Lifecycle events, one line each: what an operator greps for.
supervisor.on('subagent.spawned', (e) => log(`${e.agentId} spawned (${e.agent}, ${e.bytes.total} B copied)`));
supervisor.on('subagent.done', (e) => log(`${e.agentId} done in ${e.turns} turns`));
supervisor.on('subagent.failed', (e) => log(`${e.agentId} failed: ${e.error.message}`));
supervisor.on('subagent.crashed', (e) => log(`${e.agentId} crashed (exit code ${e.exitCode}): ${e.error.message}`));
supervisor.on('subagent.cancelled', (e) => log(`${e.agentId} cancelled (${e.reason}${e.forced ? ', forced' : ''})`));
supervisor.on('agent.failed', (e) => log(`${e.agentId} ${e.kind}: ${e.error.message}`));

let requests = 0;
let shuttingDown = false;

function reply(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, {
    'content-type': 'application/json',
    // During shutdown, no keep-alive: the server can only close once its sockets have.
    ...(shuttingDown ? { connection: 'close' } : {}),
  });
  res.end(`${JSON.stringify(body)}\n`);
}

async function readBody(req: IncomingMessage): Promise<string> {
  let size = 0;
  const chunks: Buffer[] = [];
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new RangeError(`the body is over ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

async function runTask(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const requestId = `req-${++requests}`;
  let input: { tenantId?: unknown; userId?: unknown; message?: unknown };
  try {
    input = JSON.parse(await readBody(req)) as typeof input;
  } catch (error) {
    reply(res, 400, { error: `send JSON { tenantId, userId, message }: ${(error as Error).message}` });
    return;
  }
  if (typeof input?.message !== 'string') {
    reply(res, 400, { error: 'message must be a string' });
    return;
  }
  const t0 = performance.now();
  try {
    // The scope is validated, frozen and measured here, at the edge: the
    // request's fields are untrusted until the schema has read them (a bad
    // one is a 400 naming the field).
    const scope = TenantScope.parse({
      tenantId: input.tenantId,
      userId: input.userId,
      role: 'viewer',
      permissions: [],
    });
    const agent = await supervisor.startAgent(coordinator, { scope, toolContext: { requestId } });
    log(`${requestId} started: ${agent.id}`);
    try {
      const result = await agent.send(input.message);
      log(`${requestId} ${result.status} in ${Math.round(performance.now() - t0)} ms`);
      reply(res, 200, { requestId, agentId: agent.id, reply: result });
    } finally {
      // One conversation per request: forget the agent (its state stays in persistence).
      await supervisor.stopAgent(agent.id);
    }
  } catch (error) {
    if (isTroupeError(error, 'ERR_CLOSED')) reply(res, 503, { error: 'shutting down' });
    else if (isTroupeError(error)) reply(res, 400, { error: error.message, code: error.code });
    else throw error;
  }
}

const server = createServer((req, res) => {
  if (shuttingDown) {
    reply(res, 503, { error: 'shutting down' });
    return;
  }
  const route = `${req.method} ${req.url}`;
  if (route === 'GET /health') {
    reply(res, 200, supervisor.stats());
  } else if (route === 'POST /tasks') {
    runTask(req, res).catch((error: unknown) => {
      log(`internal error: ${(error as Error)?.stack ?? String(error)}`);
      if (!res.headersSent) reply(res, 500, { error: 'internal error' });
    });
  } else {
    reply(res, 404, { error: 'try POST /tasks or GET /health' });
  }
});

async function shutdown(signal: string): Promise<void> {
  shuttingDown = true;
  // Stop accepting connections first (and drop idle keep-alive ones), so no
  // new work arrives while the supervisor drains.
  const serverClosed = once(server, 'close');
  server.close();
  server.closeIdleConnections();
  log(`${signal}: shutting down; refusing new work, in-flight runs have ${closeTimeoutMs} ms`);
  const t0 = performance.now();
  await supervisor.close({ timeoutMs: closeTimeoutMs });
  const { pool, agents, pendingRequests } = supervisor.stats();
  log(
    `supervisor closed in ${Math.round(performance.now() - t0)} ms: ${pool.threads} threads, ${pool.running} running, ${agents} agents, ${pendingRequests} pending requests`,
  );
  // Every run has answered by now; a client that keeps its socket open past a
  // second is cut off rather than allowed to hold the process.
  server.closeIdleConnections();
  setTimeout(() => server.closeAllConnections(), 1000).unref();
  await serverClosed;
  log('http server closed; bye');
  // No process.exit(): with every worker gone and the server closed, the
  // event loop is empty and the process ends by itself. This timer is unref'd,
  // so it fires only if something still holds the process open — a leak.
  setTimeout(() => {
    log('still alive 5 s after closing: something leaked a handle');
    process.exit(1);
  }, 5000).unref();
}

let stopping: Promise<void> | undefined;
function onSignal(signal: NodeJS.Signals): void {
  if (stopping !== undefined) {
    log(`${signal} again: destroying now`);
    // The drain in progress resolves as soon as destroy() has stopped everything.
    void supervisor.destroy();
    return;
  }
  stopping = shutdown(signal).catch((error: unknown) => {
    log(`shutdown failed: ${(error as Error)?.stack ?? String(error)}`);
    process.exitCode = 1;
  });
}
process.on('SIGTERM', onSignal);
process.on('SIGINT', onSignal);

await supervisor.pool.ready();
server.listen(port, '127.0.0.1', () => {
  const address = server.address() as AddressInfo;
  log(`ready http://127.0.0.1:${address.port} pid ${process.pid}, ${threads} worker threads`);
});
