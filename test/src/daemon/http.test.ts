// The example daemon as its operator relies on it, driven over real HTTP on 127.0.0.1: a child
// process on a SQLite file in a temp directory, synchronised on its stdout and its replies only.
// Bad input must get a clear 4xx and leave the daemon (and the connection) usable; what is open
// survives SIGKILL; a default subagent deadline applies; idle conversations are let go and come
// back with their history.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it, type TestContext } from 'node:test';
import { EXAMPLES_DIST, type RunningProcess, startProcess } from '../examples/startProcess.js';

const DAEMON = join(EXAMPLES_DIST, 'daemon.js');

const dirs: string[] = [];
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});
function dataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'troupe-daemon-'));
  dirs.push(dir);
  return dir;
}

interface Daemon {
  readonly process: RunningProcess;
  readonly port: number;
}

async function startDaemon(t: TestContext, dir: string, env: Readonly<Record<string, string>> = {}): Promise<Daemon> {
  const daemon = startProcess(DAEMON, { TROUPE_DATA_DIR: dir, ...env });
  t.after(() => daemon.child.kill('SIGKILL'));
  const ready = await daemon.line(/ready http:\/\/127\.0\.0\.1:(\d+) /);
  return { process: daemon, port: Number(ready[1]) };
}

async function kill(daemon: Daemon): Promise<void> {
  daemon.process.child.kill('SIGKILL');
  assert.deepEqual(await daemon.process.exited, { code: null, signal: 'SIGKILL' });
}

interface Reply {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: Record<string, unknown>;
}

/** One HTTP request over `agent` (node:http: so a test controls which connection it goes on). */
function http(port: number, method: string, path: string, body?: string, agent: Agent | false = false): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, agent }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
      });
      res.on('end', () => {
        try {
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: JSON.parse(text) });
        } catch (error) {
          reject(new Error(`not JSON (${res.statusCode}): ${text.slice(0, 200)}`, { cause: error }));
        }
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

const post = (port: number, path: string, body: unknown) => http(port, 'POST', path, JSON.stringify(body));
const get = (port: number, path: string) => http(port, 'GET', path);

const acme = { tenantId: 'acme', userId: 'u-1' };
const say = (port: number, conversation: string, message: string) =>
  post(port, `/conversations/${conversation}/messages`, { ...acme, message });

interface Question {
  readonly id: string;
  readonly kind: string;
  readonly prompt: string;
}
interface Listed {
  readonly request: Question;
  readonly path: readonly string[];
}

async function open(port: number): Promise<Listed[]> {
  const listed = await get(port, `/requests?tenantId=${acme.tenantId}&userId=${acme.userId}`);
  assert.equal(listed.status, 200, JSON.stringify(listed.body));
  return listed.body.items as Listed[];
}

function replyOf(r: Reply): { status: string; text?: string; turns?: number; request?: Question } {
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.reply as { status: string; text?: string; turns?: number; request?: Question };
}

const count = (lines: readonly string[], pattern: RegExp) => lines.filter((l) => pattern.test(l)).length;

describe('bad HTTP input gets a clear 4xx and leaves the daemon usable', { timeout: 60_000 }, () => {
  it('a body over the limit: 413, and the next request on the same keep-alive connection is served', async (t) => {
    const { port } = await startDaemon(t, dataDir());
    // One socket, kept alive: what any HTTP client library does between requests to one host.
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    t.after(() => agent.destroy());
    const huge = JSON.stringify({ ...acme, message: 'x'.repeat(200_000) });
    const refused = await http(port, 'POST', '/tasks', huge, agent);
    assert.equal(refused.status, 413);
    assert.match(refused.body.error as string, /over 65536 bytes/);
    // The 413 said `connection: keep-alive`, yet the daemon destroyed the socket (the unread body):
    // the client's next request on it dies with ECONNRESET. It should either drain the body or
    // answer with `connection: close`.
    const next = await http(port, 'GET', '/health', undefined, agent).catch((error: NodeJS.ErrnoException) => error);
    assert.ok(
      !(next instanceof Error),
      `after a 413 the next request on the connection must be served (or the 413 must say connection: close, it said ${String(refused.headers.connection)}); got ${(next as Error).message}`,
    );
    assert.equal((next as Reply).status, 200);
  });

  it('an answer whose data is nested deeply (a 10 KB body): 400, not a 500 internal error; the request stays open', async (t) => {
    const { process: daemon, port } = await startDaemon(t, dataDir());
    const question = replyOf(await say(port, 'c-1', 'deployer: api')).request as Question;
    const deep = `${'['.repeat(5000)}1${']'.repeat(5000)}`;
    const bad = await http(
      port,
      'POST',
      `/requests/${question.id}/answer`,
      `{"tenantId":"acme","userId":"u-1","ok":true,"data":${deep}}`,
    );
    assert.ok(
      bad.status >= 400 && bad.status < 500,
      `a malformed answer is the caller's error (4xx, saying what to send), got ${bad.status} ${JSON.stringify(bad.body)}; daemon log: ${daemon.lines.filter((l) => /internal error/.test(l)).join(' | ')}`,
    );
    assert.deepEqual(
      (await open(port)).map((r) => r.request.id),
      [question.id],
    );
    const answered = await post(port, `/requests/${question.id}/answer`, { ...acme, ok: true, data: { env: 'prod' } });
    assert.equal(replyOf(answered).status, 'done');
  });

  it('malformed JSON, wrong types, unknown ids, bad cursors and limits: 4xx with a message; the daemon stays up (holds)', async (t) => {
    const { process: daemon, port } = await startDaemon(t, dataDir());
    const question = replyOf(await say(port, 'c-1', 'deployer: api')).request as Question;
    const cases: [string, string, string | undefined, number, RegExp][] = [
      ['POST', '/conversations/c-2/messages', '{bad', 400, /send JSON/],
      ['POST', '/conversations/c-2/messages', '[1]', 400, /JSON object/],
      ['POST', '/conversations/c-2/messages', '', 400, /send JSON/],
      ['POST', '/conversations/c-2/messages', JSON.stringify({ ...acme, message: 5 }), 400, /message must be a string/],
      [
        'POST',
        '/conversations/c-2/messages',
        JSON.stringify({ tenantId: 5, userId: 'u', message: 'm' }),
        400,
        /tenantId/,
      ],
      ['POST', `/requests/${question.id}/answer`, JSON.stringify({ ...acme, ok: 'yes' }), 400, /ok/],
      ['POST', `/requests/${question.id}/answer`, JSON.stringify({ ...acme }), 400, /ok/],
      ['POST', `/requests/${question.id}/answer`, JSON.stringify({ ...acme, ok: false, reason: 5 }), 400, /reason/],
      ['POST', '/requests/req_nobody/answer', JSON.stringify({ ...acme, ok: true }), 404, /no request req_nobody/],
      ['POST', `/requests/${'x'.repeat(600)}/answer`, JSON.stringify({ ...acme, ok: true }), 400, /requestId/],
      ['GET', '/requests?tenantId=acme&userId=u-1&limit=abc', undefined, 400, /limit/],
      ['GET', '/requests?tenantId=acme&userId=u-1&limit=0', undefined, 400, /limit/],
      ['GET', '/requests?tenantId=acme&userId=u-1&after=zzz', undefined, 400, /cursor/],
      ['GET', '/conversations?tenantId=acme&userId=u-1&after=zzz', undefined, 400, /cursor/],
      ['GET', '/requests?tenantId=acme&userId=u-1&conversationId=', undefined, 400, /conversationId/],
      ['DELETE', '/conversations/c-1', undefined, 404, /try POST/],
    ];
    for (const [method, path, body, status, message] of cases) {
      const r = await http(port, method, path, body);
      assert.equal(
        r.status,
        status,
        `${method} ${path.slice(0, 60)} ${String(body).slice(0, 60)}: ${JSON.stringify(r.body)}`,
      );
      assert.match(r.body.error as string, message);
    }
    assert.equal(count(daemon.lines, /internal error/), 0, daemon.lines.join('\n'));
    // The question was never touched by the malformed answers.
    assert.deepEqual(
      (await open(port)).map((r) => r.request.id),
      [question.id],
    );
  });
});

describe('what an operator relies on across restarts and load', { timeout: 120_000 }, () => {
  it('TROUPE_SUBAGENT_TIMEOUT_MS is every subagent run’s deadline: a slow one is cancelled (deadline), the conversation goes on (holds)', async (t) => {
    const { process: daemon, port } = await startDaemon(t, dataDir(), { TROUPE_SUBAGENT_TIMEOUT_MS: '300' });
    const r = replyOf(await say(port, 'c-1', 'fetcher: 30000'));
    assert.equal(r.status, 'done');
    const [report] = JSON.parse(r.text as string) as { error?: { code?: string; error?: string } }[];
    assert.equal(report?.error?.code, 'ERR_CANCELLED', r.text);
    assert.match(report?.error?.error as string, /deadline/);
    await daemon.line(/acme\.c-1-sub-1 cancelled \(deadline/);
    const health = await get(port, '/health');
    assert.equal((health.body.pool as { running: number }).running, 0);
    assert.equal(replyOf(await say(port, 'c-1', 'analyst: checkout')).status, 'done');
  });

  it('three questions of two subagents in one message (two approvals, two inputs): SIGKILL between every answer; each restart lists the rest and resumes the same children (holds)', async (t) => {
    const dir = dataDir();
    let daemon = await startDaemon(t, dir);
    const first = replyOf(await say(daemon.port, 'q-1', 'deployer: api\nrefunds: o-1=5,o-2=7\ndeployer: web'));
    assert.equal(first.status, 'suspended');
    const asked = await open(daemon.port);
    assert.deepEqual(asked.map((r) => r.request.kind).sort(), ['approval', 'approval', 'input', 'input']);
    for (const r of asked) assert.equal(r.path[0], 'acme.q-1');
    const paths = new Map(asked.map((r) => [r.request.id, r.path.join(' > ')]));
    let last: { status: string; text?: string } | undefined;
    for (let left = asked.length; left > 0; left--) {
      await kill(daemon);
      daemon = await startDaemon(t, dir);
      const listed = await open(daemon.port);
      assert.equal(listed.length, left, JSON.stringify(listed));
      const [next] = listed as [Listed];
      // Same ids, same children: nothing was re-asked by a new run.
      assert.equal(next.path.join(' > '), paths.get(next.request.id));
      last = replyOf(
        await post(daemon.port, `/requests/${next.request.id}/answer`, { ...acme, ok: true, data: { env: 'dev' } }),
      );
      assert.equal(count(daemon.process.lines, / spawned \(/), 0, daemon.process.lines.join('\n'));
    }
    assert.equal(last?.status, 'done');
    assert.deepEqual(JSON.parse(last?.text as string), [
      { ok: JSON.stringify(['deployed api to dev']) },
      { ok: JSON.stringify(['refunded 5 on o-1', 'refunded 7 on o-2']) },
      { ok: JSON.stringify(['deployed web to dev']) },
    ]);
  });

  it('TROUPE_MAX_IDLE_AGENTS=1: many conversations, one held; each comes back with its history on its next message (holds)', async (t) => {
    const { port } = await startDaemon(t, dataDir(), { TROUPE_MAX_IDLE_AGENTS: '1' });
    const n = 6;
    for (let i = 0; i < n; i++) assert.equal(replyOf(await say(port, `c-${i}`, 'analyst: checkout')).status, 'done');
    const held = await get(port, '/health');
    assert.equal(held.body.agents, 1, JSON.stringify(held.body));
    for (let i = 0; i < n; i++) {
      const again = replyOf(await say(port, `c-${i}`, 'just checking'));
      // A new conversation answers in 1 turn; one with its earlier message restored in 3.
      assert.deepEqual([again.status, again.text, again.turns], ['done', 'nothing to delegate', 3], `c-${i}`);
    }
    assert.equal((await get(port, '/health')).body.agents, 1);
  });
});
