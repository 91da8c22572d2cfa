// A long-running process holding one supervisor on a SQLite file: a tiny HTTP
// API on loopback, no dependencies beyond node:http and @troupe/sqlite.
//
//   node examples/dist/daemon.js
//   curl -s localhost:<port>/conversations/c-1/messages -d '{"tenantId":"acme","userId":"u-1","message":"deployer: api"}'
//   curl -s 'localhost:<port>/requests?tenantId=acme&userId=u-1'
//   curl -s localhost:<port>/requests/<requestId>/answer -d '{"tenantId":"acme","userId":"u-1","ok":true,"data":{"env":"prod"}}'
//   kill -TERM <pid>
//
// Conversations. POST /conversations/:id/messages sends the message (lines
// `<subagent>: <instructions>`) to the conversation's coordinator — held in
// memory if it is, restored from the file if not, new otherwise — and
// answers with its reply: done, suspended (with the question), failed...
// A conversation belongs to its tenant: another tenant's `c-1` is another
// conversation. While resident it acts for the scope it was started (or
// restored) with. POST /tasks is a one-message conversation of its own.
//
// Questions. GET /requests?tenantId=&userId= lists the tenant's open requests
// from the file, so questions asked before a restart are there too; POST
// /requests/:id/answer { ok, data?, reason?, tenantId, userId } restores the
// conversation if needed, answers, and replies with what the run did then.
// Another tenant's request is a 404: rows are stored under the tenant's key.
// Tools with `requiresApproval` ask a person the same way.
//
// A client that disconnects before its reply cancels its run (the message's
// whole run tree; the log says `<req> client disconnected`).
//
// Restarts. Everything open is in the file: suspended conversations come back
// suspended, with their questions listed and answerable. A message a crash
// (or a shutdown past its timeout) interrupted is resumed lazily, on the next
// request that touches its conversation — from its last saved turn; a tool
// call that had started and not committed gets an ERR_INTERRUPTED result
// instead of running twice — and the reply reports it under `resumed`.
//
// SIGTERM or SIGINT: stop accepting connections, `supervisor.close({ timeoutMs })`
// (refuse new work, let in-flight runs finish, cancel what still runs at the
// timeout, close the file, resolve once every worker exited), then let the
// event loop drain: the process exits 0 on its own. A second signal tears
// down at once.
//
// Environment: PORT (default 0: any free port, printed on the ready line),
// TROUPE_DATA_DIR (default ./.troupe-data; the file is troupe.sqlite in it,
// printed on the ready line), TROUPE_THREADS (default 2),
// TROUPE_CLOSE_TIMEOUT_MS (default 10000), TROUPE_SUBAGENT_TIMEOUT_MS
// (default 120000: every subagent run's deadline), TROUPE_MAX_IDLE_AGENTS
// (default 1000: idle conversations kept in memory; the rest live in the file).
import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { type Answer, isTroupeError } from '@troupe/core';
import { type SqlitePersistence, sqlitePersistence } from '@troupe/sqlite';
import { type AgentHandle, type AgentReply, createSupervisor } from '@troupe/supervisor';
import { coordinator } from './agents/coordinator.js';
import { clientGone, errorReply, HttpError, readJson, reply, replyJson } from './daemon/http.js';
import { TenantScope } from './scope.js';

const started = performance.now();
function log(message: string): void {
  process.stdout.write(`daemon +${Math.round(performance.now() - started)}ms ${message}\n`);
}

/** Give up at startup, saying what to fix. */
function refuse(message: string): never {
  process.stderr.write(`daemon: ${message}\n`);
  process.exit(1);
}

function numberFromEnv(name: string, fallback: number, min: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < min) refuse(`${name} must be an integer ≥ ${min}, got "${raw}"`);
  return value;
}

const port = numberFromEnv('PORT', 0, 0);
const threads = numberFromEnv('TROUPE_THREADS', 2, 1);
const closeTimeoutMs = numberFromEnv('TROUPE_CLOSE_TIMEOUT_MS', 10_000, 0);
const subagentTimeoutMs = numberFromEnv('TROUPE_SUBAGENT_TIMEOUT_MS', 120_000, 1);
const maxIdleAgents = numberFromEnv('TROUPE_MAX_IDLE_AGENTS', 1000, 0);
const dataDir = resolve(process.env.TROUPE_DATA_DIR || '.troupe-data');

type TenantScopeValue = ReturnType<typeof TenantScope.parse>;

// Every row is stored under the scope's tenant: nothing of one tenant can be
// loaded, listed or answered under another. The scope itself is never saved.
let store: SqlitePersistence<TenantScopeValue>;
try {
  store = sqlitePersistence({ directory: dataDir, tenantKey: (scope: TenantScopeValue) => scope.tenantId });
} catch (error) {
  refuse(
    `cannot keep state in ${dataDir}: ${(error as Error).message} (set TROUPE_DATA_DIR to a directory this process can write)`,
  );
}

const supervisor = createSupervisor({
  agents: [coordinator],
  scope: TenantScope,
  pool: { threads },
  persistence: store,
  subagentTimeoutMs,
  maxIdleAgents,
  // A tool that needs approval asks a person: its request is listed and answered like any question.
  approval: (request) => ({
    decision: 'ask',
    prompt: `May ${request.agentId} call ${request.toolName} with ${JSON.stringify(request.arguments)}?`,
  }),
});

// Lifecycle events, one line each: what an operator greps for.
supervisor.on('subagent.spawned', (e) =>
  log(`${e.agentId} ${e.resumed ? 'resumed' : 'spawned'} (${e.agent}, ${e.bytes.total} B copied)`),
);
supervisor.on('subagent.done', (e) => log(`${e.agentId} done in ${e.turns} turns`));
supervisor.on('subagent.suspended', (e) => log(`${e.agentId} suspended on ${e.requestId}`));
supervisor.on('subagent.failed', (e) => log(`${e.agentId} failed: ${e.error.message}`));
supervisor.on('subagent.crashed', (e) => log(`${e.agentId} crashed (exit code ${e.exitCode}): ${e.error.message}`));
supervisor.on('subagent.cancelled', (e) => log(`${e.agentId} cancelled (${e.reason}${e.forced ? ', forced' : ''})`));
supervisor.on('agent.failed', (e) => log(`${e.agentId} ${e.kind}: ${e.error.message}`));
supervisor.on('persistence.failed', (e) => log(`${e.agentId} not saved: ${e.error.message}`));

let requests = 0;
let shuttingDown = false;

const send = (res: ServerResponse, status: number, body: unknown): void => reply(res, status, body, shuttingDown);

const ID = /^[A-Za-z0-9_-]{1,64}$/;

/** The caller's scope, validated at the edge (the supervisor would refuse it too). */
function scopeOf(input: { tenantId?: unknown; userId?: unknown }): TenantScopeValue {
  const scope = TenantScope.parse({ tenantId: input.tenantId, userId: input.userId, role: 'viewer', permissions: [] });
  if (!ID.test(scope.tenantId)) {
    throw new HttpError(400, 'scope.tenantId must be 1-64 characters of [A-Za-z0-9_-] (it names the tenant’s rows)');
  }
  return scope;
}

// A conversation's agent id: its tenant and its id (another tenant's "c-1" is another agent).
const agentIdOf = (scope: TenantScopeValue, conversationId: string): string => `${scope.tenantId}.${conversationId}`;

// Agents being started or restored: a second request for the same conversation waits for the first.
const starting = new Map<string, Promise<AgentHandle>>();

/** The conversation's agent: held, restored from the file, or new. */
async function conversationAgent(
  scope: TenantScopeValue,
  agentId: string,
  conversationId: string,
  requestId: string,
): Promise<AgentHandle> {
  const held = supervisor.agent(agentId);
  // Stopped by its restart policy: forget it and restore it from its last saved state.
  if (held?.status === 'stopped') await supervisor.stopAgent(agentId);
  else if (held !== undefined) return held;
  let pending = starting.get(agentId);
  if (pending === undefined) {
    pending = supervisor
      .startAgent(coordinator, { scope, agentId, conversationId, toolContext: { requestId } })
      .finally(() => starting.delete(agentId));
    starting.set(agentId, pending);
  }
  const agent = await pending;
  log(`${requestId} ${agentId} ${agent.status}`);
  return agent;
}

/** The scope of a GET (`?tenantId=&userId=`), or an error saying what to add. */
function queryScope(url: URL): TenantScopeValue {
  return scopeOf({
    tenantId: url.searchParams.get('tenantId') ?? undefined,
    userId: url.searchParams.get('userId') ?? undefined,
  });
}

function paging(url: URL): { limit?: number; after?: string } {
  const limit = url.searchParams.get('limit');
  const after = url.searchParams.get('after');
  return { ...(limit === null ? {} : { limit: Number(limit) }), ...(after === null ? {} : { after }) };
}

// POST /conversations/:id/messages
async function postMessage(req: IncomingMessage, res: ServerResponse, conversationId: string, rid: string) {
  const input = await readJson(req, '{ tenantId, userId, message }');
  if (typeof input.message !== 'string') throw new HttpError(400, 'message must be a string');
  const scope = scopeOf(input);
  const t0 = performance.now();
  const agent = await conversationAgent(scope, agentIdOf(scope, conversationId), conversationId, rid);
  const signal = clientGone(res, () => log(`${rid} client disconnected: cancelling ${agent.id}`));
  let resumed: AgentReply | undefined;
  if (agent.status === 'interrupted') {
    log(`${rid} resuming ${agent.id}: a restart interrupted its last message`);
    resumed = await agent.resume({ signal });
    log(`${rid} resumed ${agent.id}: ${resumed.status}`);
  }
  const also = resumed === undefined ? {} : { resumed: replyJson(resumed) };
  if (agent.status === 'suspended' || agent.status === 'interrupted') {
    const pending = agent.snapshot().pendingRequest;
    send(res, 409, {
      error:
        agent.status === 'suspended'
          ? `conversation ${conversationId} waits for an answer to ${pending?.id}: answer it (POST /requests/${pending?.id}/answer) before sending more`
          : `conversation ${conversationId} still has an interrupted message: send again to resume it`,
      code: agent.status === 'suspended' ? 'ERR_SUSPENDED' : 'ERR_INTERRUPTED',
      ...(pending === undefined ? {} : { request: pending }),
      ...also,
    });
    return;
  }
  if (signal.aborted) return;
  const result = await agent.send(input.message, { signal });
  log(`${rid} ${result.status} in ${Math.round(performance.now() - t0)} ms`);
  send(res, 200, { http: rid, conversationId, agentId: agent.id, ...also, reply: replyJson(result) });
}

// POST /tasks: a conversation of one message (kept in the file: a question it asks is answered later).
async function postTask(req: IncomingMessage, res: ServerResponse, rid: string) {
  const input = await readJson(req, '{ tenantId, userId, message }');
  if (typeof input.message !== 'string') throw new HttpError(400, 'message must be a string');
  const scope = scopeOf(input);
  const t0 = performance.now();
  const agent = await supervisor.startAgent(coordinator, { scope, toolContext: { requestId: rid } });
  log(`${rid} started: ${agent.id}`);
  const signal = clientGone(res, () => log(`${rid} client disconnected: cancelling ${agent.id}`));
  try {
    const result = await agent.send(input.message, { signal });
    log(`${rid} ${result.status} in ${Math.round(performance.now() - t0)} ms`);
    send(res, 200, { http: rid, agentId: agent.id, reply: replyJson(result) });
  } finally {
    // One conversation per request: forget the agent (its state stays in the file).
    await supervisor.stopAgent(agent.id);
  }
}

// POST /requests/:id/answer
async function postAnswer(req: IncomingMessage, res: ServerResponse, requestId: string, rid: string) {
  const input = await readJson(req, '{ tenantId, userId, ok, data?, reason? }');
  const scope = scopeOf(input);
  // Looked up under the caller's tenant: another tenant's request is not there.
  const record = await store.getRequest(scope, requestId);
  if (record === undefined)
    throw new HttpError(404, `no request ${requestId} for tenant ${scope.tenantId}`, 'ERR_UNKNOWN_REQUEST');
  const t0 = performance.now();
  const agent = await conversationAgent(scope, record.agentId, record.conversationId, rid);
  let gone = false;
  clientGone(res, () => {
    gone = true;
    // Only a running message is cancelled: cancelling a suspended one would withdraw its question.
    if (agent.status !== 'running') return;
    log(`${rid} client disconnected: cancelling ${agent.id}`);
    agent.cancel('user');
  });
  // Gone before the answer was given: the request stays open for the next caller.
  if (gone) return;
  const answer = { ok: input.ok, data: input.data, reason: input.reason } as Omit<Answer, 'id'>;
  const result = await supervisor.answer(requestId, answer, { scope, toolContext: { requestId: rid } });
  log(`${rid} answered ${requestId}: ${result.status} in ${Math.round(performance.now() - t0)} ms`);
  send(res, 200, { http: rid, conversationId: record.conversationId, agentId: agent.id, reply: replyJson(result) });
}

/** A path segment, decoded (a malformed escape is the caller's error, not ours). */
function segment(raw: string | undefined): string {
  try {
    return decodeURIComponent(raw ?? '');
  } catch {
    throw new HttpError(400, `the path segment "${raw}" is not valid percent-encoding`);
  }
}

async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://127.0.0.1');
  const parts = url.pathname.split('/').filter(Boolean);
  const rid = `http-${++requests}`;
  if (req.method === 'GET' && url.pathname === '/health') {
    send(res, 200, supervisor.stats());
  } else if (req.method === 'POST' && url.pathname === '/tasks') {
    await postTask(req, res, rid);
  } else if (req.method === 'POST' && parts.length === 3 && parts[0] === 'conversations' && parts[2] === 'messages') {
    const id = segment(parts[1]);
    if (!ID.test(id)) throw new HttpError(400, 'a conversation id is 1-64 characters of [A-Za-z0-9_-]');
    await postMessage(req, res, id, rid);
  } else if (req.method === 'GET' && url.pathname === '/conversations') {
    const page = await store.listConversations(queryScope(url), paging(url));
    // A conversation saved `running` and not running here was interrupted: its next message resumes it.
    const items = page.items.map((c) => {
      const held = supervisor.agent(c.agentId);
      return { ...c, status: held?.status ?? (c.status === 'running' ? 'interrupted' : c.status) };
    });
    send(res, 200, { items, next: page.next });
  } else if (req.method === 'GET' && url.pathname === '/requests') {
    const conversationId = url.searchParams.get('conversationId');
    const page = await supervisor.listRequests(queryScope(url), {
      ...paging(url),
      ...(conversationId === null ? {} : { conversationId }),
    });
    send(res, 200, page);
  } else if (req.method === 'POST' && parts.length === 3 && parts[0] === 'requests' && parts[2] === 'answer') {
    await postAnswer(req, res, segment(parts[1]), rid);
  } else {
    send(res, 404, {
      error:
        'try POST /conversations/:id/messages, GET /conversations, GET /requests, POST /requests/:id/answer, POST /tasks or GET /health',
    });
  }
}

const server = createServer((req, res) => {
  if (shuttingDown) {
    send(res, 503, { error: 'shutting down' });
    return;
  }
  route(req, res).catch((error: unknown) => {
    if (isTroupeError(error, 'ERR_CLOSED')) {
      send(res, 503, { error: 'shutting down' });
      return;
    }
    const known = errorReply(error);
    if (known !== undefined) {
      send(res, known.status, known.body);
      return;
    }
    log(`internal error: ${(error as Error)?.stack ?? String(error)}`);
    send(res, 500, { error: 'internal error' });
  });
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
  // close() closed the file; after a destroy() (second signal) this does.
  await store.close();
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
  log(`ready http://127.0.0.1:${address.port} pid ${process.pid}, ${threads} worker threads, state in ${store.file}`);
});
