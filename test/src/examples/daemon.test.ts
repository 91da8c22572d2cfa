// The daemon example as an operator runs it: a child process on a SQLite file
// in a temp directory, a readiness line on stdout, real HTTP on 127.0.0.1,
// SIGTERM / SIGKILL and a new process on the same file. Synchronised on its
// output and its replies only.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it, type TestContext } from 'node:test';
import { EXAMPLES_DIST, type RunningProcess, startProcess } from './startProcess.js';

const DAEMON = join(EXAMPLES_DIST, 'daemon.js');

const dirs: string[] = [];
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** A fresh data directory for one test (removed at the end of the file). */
function dataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'troupe-daemon-'));
  dirs.push(dir);
  return dir;
}

interface Daemon {
  readonly process: RunningProcess;
  readonly port: number;
  readonly file: string;
}

/** Start a daemon on `dir` and wait for its ready line; it is killed at the end of the test if still alive. */
async function startDaemon(t: TestContext, dir: string, env: Readonly<Record<string, string>> = {}): Promise<Daemon> {
  const daemon = startProcess(DAEMON, { TROUPE_DATA_DIR: dir, ...env });
  t.after(() => daemon.child.kill('SIGKILL'));
  const ready = await daemon.line(/ready http:\/\/127\.0\.0\.1:(\d+) .* state in (.+)$/);
  return { process: daemon, port: Number(ready[1]), file: ready[2] as string };
}

interface Reply {
  readonly status: number;
  readonly body: Record<string, unknown>;
}

async function call(port: number, path: string, body?: unknown, signal?: AbortSignal): Promise<Reply> {
  const response = await fetch(`http://127.0.0.1:${port}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    ...(signal === undefined ? {} : { signal }),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

const acme = { tenantId: 'acme', userId: 'u-1' };
const globex = { tenantId: 'globex', userId: 'u-9' };

const postTask = (port: number, message: string) => call(port, '/tasks', { ...acme, message });
const say = (port: number, conversation: string, message: string, who = acme, signal?: AbortSignal) =>
  call(port, `/conversations/${conversation}/messages`, { ...who, message }, signal);
const listRequests = (port: number, who = acme) =>
  call(port, `/requests?tenantId=${who.tenantId}&userId=${who.userId}`);
const answer = (port: number, id: string, a: Record<string, unknown>, who = acme) =>
  call(port, `/requests/${id}/answer`, { ...who, ...a });

/** Index of the first line matching `pattern` (-1 if none). */
function indexOf(lines: readonly string[], pattern: RegExp): number {
  return lines.findIndex((line) => pattern.test(line));
}

/** A reply without its token counts. */
function bare(reply: unknown): Record<string, unknown> {
  const { usage: _usage, totalUsage: _total, ...rest } = reply as Record<string, unknown>;
  return rest;
}

interface Question {
  readonly id: string;
  readonly kind: string;
  readonly prompt: string;
}

/** The question a suspended reply asks. */
function questionOf(r: Reply): Question {
  assert.equal(r.status, 200, JSON.stringify(r.body));
  const reply = r.body.reply as { status: string; request?: Question };
  assert.equal(reply.status, 'suspended', JSON.stringify(r.body));
  return reply.request as Question;
}

/** The coordinator's report: one entry per delegated line. */
function reportOf(r: Reply): unknown[] {
  assert.equal(r.status, 200, JSON.stringify(r.body));
  const reply = r.body.reply as { status: string; text: string };
  assert.equal(reply.status, 'done', JSON.stringify(r.body));
  return JSON.parse(reply.text) as unknown[];
}

/** The ids of the tenant's open requests. */
async function openIds(port: number, who = acme): Promise<string[]> {
  const listed = await listRequests(port, who);
  assert.equal(listed.status, 200, JSON.stringify(listed.body));
  return (listed.body.items as { request: { id: string } }[]).map((r) => r.request.id);
}

describe('examples/daemon: lifecycle', { timeout: 60_000 }, () => {
  it('SIGTERM: refuses new work, lets the in-flight run finish, stops every worker, exits 0', async (t) => {
    const { process: daemon, port, file } = await startDaemon(t, dataDir(), { TROUPE_CLOSE_TIMEOUT_MS: '10000' });
    assert.match(file, /troupe\.sqlite$/);

    const inFlight = postTask(port, 'fetcher: 1000');
    await daemon.line(/-sub-1 spawned \(fetcher/);
    daemon.child.kill('SIGTERM');
    await daemon.line(/SIGTERM: shutting down/);
    // The listening socket closed before the daemon said so: a new connection is refused.
    await assert.rejects(postTask(port, 'analyst: checkout'), (error: Error) => {
      assert.equal((error.cause as { code?: string } | undefined)?.code, 'ECONNREFUSED');
      return true;
    });

    const { status, body } = await inFlight;
    assert.equal(status, 200);
    assert.deepEqual(bare(body.reply), {
      status: 'done',
      text: JSON.stringify([{ ok: 'upstream answered after 1000 ms' }]),
      turns: 2,
    });
    const exit = await daemon.exited;
    assert.deepEqual(exit, { code: 0, signal: null }, daemon.stderr());
    const lines = daemon.lines;
    const shuttingDown = indexOf(lines, /SIGTERM: shutting down/);
    assert.ok(
      shuttingDown < indexOf(lines, /http-1 done in/),
      `the run was still in flight when the shutdown began:\n${lines.join('\n')}`,
    );
    assert.ok(indexOf(lines, /supervisor closed in \d+ ms: 0 threads, 0 running, 0 agents/) > shuttingDown);
    assert.ok(indexOf(lines, /http server closed; bye/) > shuttingDown);
    assert.equal(indexOf(lines, /leaked/), -1);
    assert.equal(daemon.stderr(), '');
  });

  it('SIGTERM with a run past the close timeout: the run is cancelled (shutdown) and the daemon still exits 0', async (t) => {
    const { process: daemon, port } = await startDaemon(t, dataDir(), { TROUPE_CLOSE_TIMEOUT_MS: '50' });

    const inFlight = postTask(port, 'fetcher: 30000');
    await daemon.line(/-sub-1 spawned \(fetcher/);
    daemon.child.kill('SIGTERM');

    const { status, body } = await inFlight;
    assert.equal(status, 200);
    assert.deepEqual(bare(body.reply), { status: 'cancelled', reason: 'shutdown' });
    assert.deepEqual(await daemon.exited, { code: 0, signal: null }, daemon.stderr());
    const lines = daemon.lines;
    assert.ok(
      // Cooperatively, or forced after the grace when the machine is too busy for the tool to see it in time.
      indexOf(lines, /-sub-1 cancelled \(parent(, forced)?\)/) > indexOf(lines, /SIGTERM: shutting down/),
      lines.join('\n'),
    );
    assert.ok(indexOf(lines, /supervisor closed in \d+ ms: 0 threads, 0 running/) >= 0, lines.join('\n'));
  });

  it('a second signal during the drain tears down at once: the run ends cancelled (forced), exit 0', async (t) => {
    const { process: daemon, port } = await startDaemon(t, dataDir(), { TROUPE_CLOSE_TIMEOUT_MS: '10000' });

    const inFlight = postTask(port, 'fetcher: 30000');
    await daemon.line(/-sub-1 spawned \(fetcher/);
    daemon.child.kill('SIGTERM');
    await daemon.line(/SIGTERM: shutting down/);
    daemon.child.kill('SIGINT');

    const { body } = await inFlight;
    assert.deepEqual(bare(body.reply), { status: 'cancelled', reason: 'shutdown' });
    assert.deepEqual(await daemon.exited, { code: 0, signal: null }, daemon.stderr());
    const lines = daemon.lines;
    assert.ok(indexOf(lines, /SIGINT again: destroying now/) >= 0, lines.join('\n'));
    assert.ok(indexOf(lines, /-sub-1 cancelled \(shutdown, forced\)/) >= 0, lines.join('\n'));
    assert.ok(indexOf(lines, /supervisor closed in \d+ ms: 0 threads, 0 running/) >= 0, lines.join('\n'));
  });

  it('answers a bad scope with 400 at the edge and SIGINT stops an idle daemon', async (t) => {
    const { process: daemon, port } = await startDaemon(t, dataDir());
    const noTenant = await call(port, '/tasks', { userId: 'u-1', message: 'analyst: checkout' });
    assert.equal(noTenant.status, 400);
    assert.match(noTenant.body.error as string, /scope\.tenantId/);
    const badTenant = await say(port, 'c-1', 'hello', { tenantId: 'a b', userId: 'u-1' });
    assert.equal(badTenant.status, 400);
    assert.match(badTenant.body.error as string, /scope\.tenantId must be 1-64 characters/);
    const badConversation = await say(port, 'c%201', 'hello');
    assert.equal(badConversation.status, 400);
    assert.match(badConversation.body.error as string, /conversation id/);
    const noUser = await call(port, '/requests?tenantId=acme');
    assert.equal(noUser.status, 400);
    assert.match(noUser.body.error as string, /scope\.userId/);
    daemon.child.kill('SIGINT');
    assert.deepEqual(await daemon.exited, { code: 0, signal: null }, daemon.stderr());
    assert.ok(indexOf(daemon.lines, /SIGINT: shutting down/) >= 0);
  });

  it('a data directory it cannot write: a clear error naming it, exit 1, before listening', async () => {
    const dir = dataDir();
    const file = join(dir, 'not-a-directory');
    writeFileSync(file, 'x');
    const daemon = startProcess(DAEMON, { TROUPE_DATA_DIR: join(file, 'data') });
    assert.deepEqual(await daemon.exited, { code: 1, signal: null });
    assert.match(daemon.stderr(), /cannot keep state in .*not-a-directory\/data: .*ENOTDIR.*set TROUPE_DATA_DIR/);
    assert.equal(indexOf(daemon.lines, /ready/), -1);
  });
});

describe('examples/daemon: conversations and questions', { timeout: 60_000 }, () => {
  it('a conversation goes on over messages; another tenant’s conversation of the same id is another one', async (t) => {
    const { port } = await startDaemon(t, dataDir());
    const first = await say(port, 'c-1', 'analyst: checkout');
    const [inspection] = reportOf(first) as { ok: string }[];
    assert.equal((JSON.parse(inspection?.ok as string) as { tenantId: string }).tenantId, 'acme');
    assert.equal(first.body.agentId, 'acme.c-1');
    const second = await say(port, 'c-1', 'just checking');
    assert.equal(second.status, 200);
    assert.deepEqual(bare(second.body.reply), { status: 'done', text: 'nothing to delegate', turns: 3 });
    // The same id under another tenant starts from nothing.
    const theirs = await say(port, 'c-1', 'just checking', globex);
    assert.deepEqual(bare(theirs.body.reply), { status: 'done', text: 'nothing to delegate', turns: 1 });
    assert.equal(theirs.body.agentId, 'globex.c-1');
    const listed = await call(port, '/conversations?tenantId=acme&userId=u-1');
    assert.deepEqual(
      (listed.body.items as { conversationId: string; status: string }[]).map((c) => [c.conversationId, c.status]),
      [['c-1', 'idle']],
    );
  });

  it('a question asked by a subagent is listed and answered through the endpoints; a second answer is refused', async (t) => {
    const { process: daemon, port } = await startDaemon(t, dataDir());
    const question = questionOf(await say(port, 'c-1', 'deployer: api'));
    assert.equal(question.prompt, 'Which environment should api go to?');
    assert.deepEqual(await openIds(port), [question.id]);
    // While it waits, the conversation takes no other message.
    const busy = await say(port, 'c-1', 'analyst: checkout');
    assert.equal(busy.status, 409);
    assert.equal(busy.body.code, 'ERR_SUSPENDED');
    assert.deepEqual((busy.body.request as Question).id, question.id);

    const answered = await answer(port, question.id, { ok: true, data: { env: 'prod' } });
    assert.deepEqual(reportOf(answered), [{ ok: JSON.stringify(['deployed api to prod']) }]);
    assert.deepEqual(await openIds(port), []);
    const again = await answer(port, question.id, { ok: true, data: { env: 'dev' } });
    assert.equal(again.status, 409);
    assert.equal(again.body.code, 'ERR_REQUEST_ALREADY_ANSWERED');
    assert.ok(indexOf(daemon.lines, /-sub-1 suspended on req_/) >= 0, daemon.lines.join('\n'));

    // A one-message task's question outlives its agent (stopped after the reply): the answer restores it.
    const task = questionOf(await postTask(port, 'deployer: web'));
    const done = await answer(port, task.id, { ok: true, data: { env: 'staging' } });
    assert.deepEqual(reportOf(done), [{ ok: JSON.stringify(['deployed web to staging']) }]);
    const malformed = await answer(port, '%E0%A4%A', { ok: true });
    assert.equal(malformed.status, 400);
    assert.match(malformed.body.error as string, /percent-encoding/);
  });

  it('a tool that needs approval asks a person: approved through the endpoint, it runs once', async (t) => {
    const { port } = await startDaemon(t, dataDir());
    const question = questionOf(await say(port, 'c-1', 'refunds: o-1=5'));
    assert.equal(question.kind, 'approval');
    assert.match(question.prompt, /call refund with \{"order":"o-1","amount":5\}/);
    const approved = await answer(port, question.id, { ok: true });
    assert.deepEqual(reportOf(approved), [{ ok: JSON.stringify(['refunded 5 on o-1']) }]);
  });

  it('another tenant can neither list nor answer a request (404), and the request stays open', async (t) => {
    const { port } = await startDaemon(t, dataDir());
    const question = questionOf(await say(port, 'c-1', 'deployer: api'));
    assert.deepEqual(await openIds(port, globex), []);
    const refused = await answer(port, question.id, { ok: true, data: { env: 'evil' } }, globex);
    assert.equal(refused.status, 404);
    assert.equal(refused.body.code, 'ERR_UNKNOWN_REQUEST');
    assert.deepEqual(await openIds(port), [question.id]);
    const answered = await answer(port, question.id, { ok: true, data: { env: 'eu' } });
    assert.deepEqual(reportOf(answered), [{ ok: JSON.stringify(['deployed api to eu']) }]);
  });

  it('a client that disconnects cancels its run: the whole tree stops, the conversation takes the next message', async (t) => {
    const { process: daemon, port } = await startDaemon(t, dataDir());
    const client = new AbortController();
    const hanging = say(port, 'c-1', 'fetcher: 30000', acme, client.signal);
    await daemon.line(/acme\.c-1-sub-1 spawned \(fetcher/);
    client.abort();
    await assert.rejects(hanging, { name: 'AbortError' });
    await daemon.line(/http-1 client disconnected: cancelling acme\.c-1/);
    // Cooperatively, or forced after the grace when the machine is too busy for the tool to see it in time.
    await daemon.line(/acme\.c-1-sub-1 cancelled \(parent(, forced)?\)/);
    await daemon.line(/http-1 cancelled in \d+ ms/);
    const health = await call(port, '/health');
    assert.equal((health.body.pool as { running: number }).running, 0, JSON.stringify(health.body));
    const next = await say(port, 'c-1', 'analyst: checkout');
    assert.equal(reportOf(next).length, 1);
  });
});

describe('examples/daemon: a restart restores everything open', { timeout: 90_000 }, () => {
  for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
    it(`${signal}: a new process on the same directory lists the question, answers it, and the run completes`, async (t) => {
      const dir = dataDir();
      const a = await startDaemon(t, dir);
      const question = questionOf(await say(a.port, 'c-1', 'deployer: api'));
      a.process.child.kill(signal);
      assert.deepEqual(
        await a.process.exited,
        signal === 'SIGTERM' ? { code: 0, signal: null } : { code: null, signal: 'SIGKILL' },
      );

      const b = await startDaemon(t, dir);
      assert.equal(b.file, a.file);
      const listed = await listRequests(b.port);
      assert.deepEqual(
        (listed.body.items as { request: Question; conversationId: string; path: string[] }[]).map((r) => [
          r.request.id,
          r.request.prompt,
          r.conversationId,
          r.path,
        ]),
        [[question.id, 'Which environment should api go to?', 'c-1', ['acme.c-1', 'acme.c-1-sub-1']]],
      );
      assert.deepEqual(await openIds(b.port, globex), []);
      assert.equal((await answer(b.port, question.id, { ok: true }, globex)).status, 404);
      // Answered by another user of the tenant: the restored run acts for them.
      const answered = await answer(
        b.port,
        question.id,
        { ok: true, data: { env: 'prod' } },
        { ...acme, userId: 'u-2' },
      );
      assert.deepEqual(reportOf(answered), [{ ok: JSON.stringify(['deployed api to prod']) }]);
      assert.ok(indexOf(b.process.lines, /acme\.c-1-sub-1 resumed \(deployer/) >= 0, b.process.lines.join('\n'));
      assert.deepEqual(await openIds(b.port), []);
      // The conversation goes on from where the first process left it.
      const next = await say(b.port, 'c-1', 'and now?');
      assert.deepEqual(bare(next.body.reply), { status: 'done', text: 'nothing to delegate', turns: 3 });
      b.process.child.kill('SIGTERM');
      assert.deepEqual(await b.process.exited, { code: 0, signal: null }, b.process.stderr());
    });
  }

  it('SIGKILL mid-run: the conversation is listed interrupted; its next message resumes it (the started task is not re-run) and goes on', async (t) => {
    const dir = dataDir();
    const a = await startDaemon(t, dir, { TROUPE_CLOSE_TIMEOUT_MS: '50' });
    const hanging = say(a.port, 'c-2', 'fetcher: 30000').catch((error: Error) => error);
    await a.process.line(/acme\.c-2-sub-1 spawned \(fetcher/);
    a.process.child.kill('SIGKILL');
    assert.deepEqual(await a.process.exited, { code: null, signal: 'SIGKILL' });
    assert.ok((await hanging) instanceof Error, 'the client lost its connection');

    const b = await startDaemon(t, dir);
    const listed = await call(b.port, '/conversations?tenantId=acme&userId=u-1');
    assert.deepEqual(
      (listed.body.items as { conversationId: string; status: string }[]).map((c) => [c.conversationId, c.status]),
      [['c-2', 'interrupted']],
    );
    const next = await say(b.port, 'c-2', 'hello');
    assert.equal(next.status, 200, JSON.stringify(next.body));
    const resumed = next.body.resumed as { status: string; text: string };
    assert.equal(resumed.status, 'done', JSON.stringify(next.body));
    const [report] = JSON.parse(resumed.text) as { error?: { code?: string } }[];
    assert.equal(report?.error?.code, 'ERR_INTERRUPTED', resumed.text);
    assert.deepEqual(bare(next.body.reply), { status: 'done', text: 'nothing to delegate', turns: 3 });
    assert.equal(indexOf(b.process.lines, /spawned \(fetcher/), -1, 'the fetcher was not run again');
    assert.ok(indexOf(b.process.lines, /resuming acme\.c-2: a restart interrupted its last message/) >= 0);
    const after = await call(b.port, '/conversations?tenantId=acme&userId=u-1');
    assert.equal((after.body.items as { status: string }[])[0]?.status, 'idle');
  });

  it('SIGTERM mid-run past the close timeout: the client is told cancelled (shutdown), and so it stays: the next process finds the conversation idle and does not resume the cut message', async (t) => {
    const dir = dataDir();
    const a = await startDaemon(t, dir, { TROUPE_CLOSE_TIMEOUT_MS: '50' });
    const hanging = say(a.port, 'c-2', 'fetcher: 30000').catch((error: Error) => error);
    await a.process.line(/acme\.c-2-sub-1 spawned \(fetcher/);
    a.process.child.kill('SIGTERM');
    assert.deepEqual(bare(((await hanging) as Reply).body.reply), { status: 'cancelled', reason: 'shutdown' });
    assert.deepEqual(await a.process.exited, { code: 0, signal: null }, a.process.stderr());

    const b = await startDaemon(t, dir);
    const listed = await call(b.port, '/conversations?tenantId=acme&userId=u-1');
    assert.deepEqual(
      (listed.body.items as { conversationId: string; status: string }[]).map((c) => [c.conversationId, c.status]),
      [['c-2', 'idle']],
    );
    const next = await say(b.port, 'c-2', 'hello');
    assert.equal(next.status, 200, JSON.stringify(next.body));
    assert.equal(next.body.resumed, undefined, 'a cancelled message is not resumed');
    assert.equal(bare(next.body.reply).status, 'done', JSON.stringify(next.body));
    assert.equal(indexOf(b.process.lines, /spawned \(fetcher/), -1, 'the fetcher was not run again');
  });
});
