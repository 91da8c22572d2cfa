// `pnpm demo` on a real adapter: with TROUPE_MODEL_BASE_URL set, the demo's
// agents talk to an OpenAI-compatible server (here one on 127.0.0.1 that
// follows their instructions), subagents from their workers with the key of
// their own environment; and a wrong base URL, a refused connection, a wrong
// key or a missing model is one line that says what to fix, exit 1.
//
// It shares the machine with other test files: the demo holds its timing
// claims (a cancel seen within 5 ms, the fan-out's speed-up) to a bare thread
// measured between its own runs, and says so when other processes hold the
// cores (“the machine is busy”) rather than failing; its strict run is the
// README's first command, alone on the machine.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ChatServer, json } from '../openai/chatServer.js';
import { tempDir } from '../persistence/sqliteFiles.js';
import { instructedModel, ownWordsModel } from './instructedModel.js';
import { EXAMPLES_DIST, startProcess } from './startProcess.js';

const KEY = 'sk-demo-test';

/** Run an example with the model variables (and nothing inherited that would choose another model). */
function run(script: string, env: Record<string, string>) {
  const clean: Record<string, string> = { TROUPE_MODEL_BASE_URL: '', TROUPE_MODEL: '', TROUPE_MODEL_API_KEY: '' };
  clean.OPENAI_API_KEY = '';
  return startProcess(join(EXAMPLES_DIST, script), { ...clean, ...env });
}

/** A port nothing listens on (bound, then closed). */
async function closedPort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  await once(server, 'close');
  return port;
}

/** Exit 1, and exactly one line on stderr, with no stack trace; returns it. */
async function oneLine(demo: ReturnType<typeof run>): Promise<string> {
  const exit = await demo.exited;
  const stderr = demo.stderr();
  assert.deepEqual(exit, { code: 1, signal: null }, `${demo.lines.join('\n')}\n${stderr}`);
  const lines = stderr.split('\n').filter((l) => l.trim() !== '');
  assert.equal(lines.length, 1, stderr);
  assert.doesNotMatch(stderr, /^\s+at /m, 'no stack trace');
  assert.deepEqual(demo.lines, [], 'nothing ran');
  return lines[0] as string;
}

describe('the demo on a real model adapter', () => {
  let server: ChatServer;
  before(async () => {
    server = await ChatServer.start();
  });
  after(() => server.close());

  it('runs every scene and holds every claim, each agent calling the server from its own thread', {
    timeout: 60_000,
  }, async (t) => {
    server.reset();
    server.script(...Array.from({ length: 200 }, () => instructedModel('served-model')));
    const dir = tempDir('demo-model');
    t.after(() => dir.remove());
    const demo = run('demo.js', {
      TROUPE_MODEL_BASE_URL: server.baseURL,
      TROUPE_MODEL: 'demo-model',
      TROUPE_MODEL_API_KEY: KEY,
      TROUPE_DEMO_DIR: dir.dir,
    });
    t.after(() => demo.child.kill('SIGKILL'));
    const exit = await demo.exited;
    const output = `${demo.lines.join('\n')}\n${demo.stderr()}`;
    assert.deepEqual(exit, { code: 0, signal: null }, output);
    assert.match(output, new RegExp(`models: demo-model at ${server.baseURL.replace(/[.]/g, '\\.')}`));
    assert.match(output, /^\d+ claims checked in /m);
    // A failure is a line starting with ✗ (the agents' tree marks a killed or crashed agent ✗, indented).
    assert.doesNotMatch(output, /^✗/m);
    // The check, then every agent but the two that stay scripted (the warm-up echo, the hostile validator).
    const asked = new Set(
      server.received.map((r) =>
        ((r.body.tools ?? []) as { function: { name: string } }[]).map((x) => x.function.name).join(','),
      ),
    );
    for (const tools of ['', 'task', 'inspect_logs', 'sum_primes', 'deploy', 'refund', 'export_report']) {
      assert.ok(asked.has(tools), `a request offering [${tools}]: ${[...asked].join(' | ')}`);
    }
    assert.ok(!asked.has('validate_input'), 'the validator stays scripted');
    for (const r of server.received) {
      assert.equal(r.body.model, 'demo-model');
      assert.equal(r.headers.authorization, `Bearer ${KEY}`);
      assert.equal(r.body.stream, true);
    }
  });

  it('a model that does not follow the script: the check it broke fails, saying which and why, exit 1 (not 13)', {
    timeout: 60_000,
  }, async (t) => {
    server.reset();
    server.script(...Array.from({ length: 200 }, () => ownWordsModel('served-model', 'Sure! I checked it: all fine.')));
    const dir = tempDir('demo-own-words');
    t.after(() => dir.remove());
    const demo = run('demo.js', {
      TROUPE_MODEL_BASE_URL: server.baseURL,
      TROUPE_MODEL: 'demo-model',
      TROUPE_MODEL_API_KEY: KEY,
      TROUPE_DEMO_DIR: dir.dir,
    });
    t.after(() => demo.child.kill('SIGKILL'));
    const exit = await demo.exited;
    const stderr = demo.stderr();
    const output = `${demo.lines.join('\n')}\n${stderr}`;
    assert.deepEqual(exit, { code: 1, signal: null }, output);
    // The fan-out is scripted whatever the model: it passes; the runaway scene's forms is the first to ask the model.
    assert.match(output, /✓ triage delegated the 4 calls in one turn/);
    const failure = stderr.replace(/\s+/g, ' ');
    assert.match(failure, /^✗ /, stderr);
    // Which check: what the scene waited for, or the answer that was not the shape asked for.
    assert.match(
      failure,
      /(scene 2: runaway tool could not finish: its next checks needed .*validate_input to start on a worker \(forms delegating to validator\)|validate_input to start on a worker \(forms delegating to validator\): it did not happen within|the delegating agent's answer is not the JSON array of its tasks' results .* it answered "Sure! I checked it: all fine\.")/,
    );
    // Why, and what to do.
    assert.match(
      failure,
      new RegExp(
        `The agents run on demo-model at ${server.baseURL.replace(/[.]/g, '\\.')} \\(TROUPE_MODEL_BASE_URL\\), which did not do what this scene's script needs: .* unset TROUPE_MODEL_BASE_URL to run it on its scripts\\.`,
      ),
    );
    assert.doesNotMatch(stderr, /^\s+at /m, 'no stack trace');
  });

  it('examples/stream prints the tokens of the parent and of each subagent under its path, then the tree’s usage', {
    timeout: 30_000,
  }, async (t) => {
    server.reset();
    server.script(...Array.from({ length: 20 }, () => instructedModel('served-model')));
    const example = run('stream.js', {
      TROUPE_MODEL_BASE_URL: server.baseURL,
      TROUPE_MODEL: 'demo-model',
      OPENAI_API_KEY: KEY,
    });
    t.after(() => example.child.kill('SIGKILL'));
    const exit = await example.exited;
    const stdout = example.lines.join('\n');
    assert.deepEqual(exit, { code: 0, signal: null }, `${stdout}\n${example.stderr()}`);
    // Who wrote what: each line starts with the writer's path; the two analysts stream at once.
    const byWriter = new Map<string, string>();
    for (const line of example.lines) {
      const m = /^(agent_[^: ]+(?: > [^: ]+)*): (.*)$/.exec(line);
      if (m !== null) byWriter.set(m[1] as string, (byWriter.get(m[1] as string) ?? '') + m[2]);
    }
    const writers = [...byWriter.keys()];
    const parent = writers.find((w) => !w.includes(' > ')) ?? '';
    assert.deepEqual(
      writers.sort(),
      [parent, `${parent} > ${parent}-sub-1`, `${parent} > ${parent}-sub-2`].sort(),
      stdout,
    );
    const inspected = [1, 2].map((i) => JSON.parse(byWriter.get(`${parent} > ${parent}-sub-${i}`) ?? '{}').service);
    assert.deepEqual(inspected.sort(), ['billing', 'checkout']);
    const reports = JSON.parse(byWriter.get(parent) ?? '[]') as { ok: string }[];
    assert.deepEqual(
      reports.map((r) => JSON.parse(r.ok).service),
      ['checkout', 'billing'],
    );
    // 6 calls (the parent twice, each analyst twice), 100 in and 50 cached each.
    assert.match(
      stdout,
      /done; tokens of the whole tree: \{\s*inputTokens: 600,\s*outputTokens: \d+,\s*cachedInputTokens: 300\s*\}/,
    );
    assert.equal(server.received.length, 6);
    assert.ok(server.received.every((r) => r.headers.authorization === `Bearer ${KEY}`));
    assert.match(
      example.stderr(),
      /\] demo-model: 100 in \(50 cached\), \d+ out, \d+ ms, first token after \d+ ms, 1 attempt\(s\)/,
    );
  });

  it('a refused connection: one line naming the URL and the variable, exit 1', { timeout: 30_000 }, async () => {
    const port = await closedPort();
    const line = await oneLine(
      run('demo.js', { TROUPE_MODEL_BASE_URL: `http://127.0.0.1:${port}/v1`, TROUPE_MODEL: 'llama3.2' }),
    );
    assert.match(line, /cannot reach the model server at http:\/\/127\.0\.0\.1:\d+\/v1 \(ECONNREFUSED/);
    assert.match(line, /baseURL is TROUPE_MODEL_BASE_URL/);
  });

  it('a wrong key: one line saying the server refused it and which variable holds it, exit 1', {
    timeout: 30_000,
  }, async () => {
    server.reset();
    server.script((res) =>
      json(res, 401, { error: { message: 'Incorrect API key provided', code: 'invalid_api_key' } }),
    );
    const line = await oneLine(
      run('demo.js', {
        TROUPE_MODEL_BASE_URL: server.baseURL,
        TROUPE_MODEL: 'gpt-4.1-mini',
        TROUPE_MODEL_API_KEY: 'sk-wrong',
      }),
    );
    assert.equal(server.received[0]?.headers.authorization, 'Bearer sk-wrong');
    assert.match(line, /refused the credentials \(401: Incorrect API key provided\)/);
    assert.match(line, /apiKey is TROUPE_MODEL_API_KEY or OPENAI_API_KEY/);
  });

  it('a wrong base URL (a server without /v1 there): one line saying to check it, exit 1', {
    timeout: 30_000,
  }, async () => {
    server.reset();
    // What an OpenAI-compatible server answers for a path it does not serve.
    server.script((res, received) => json(res, 404, { error: { message: `404 page not found: ${received.url}` } }));
    const root = server.baseURL.replace(/\/v1$/, '');
    const line = await oneLine(run('demo.js', { TROUPE_MODEL_BASE_URL: root, TROUPE_MODEL: 'llama3.2' }));
    assert.equal(server.received[0]?.url, '/chat/completions');
    assert.match(line, /has no chat completions for model "llama3\.2" .*check baseURL \(it usually ends in \/v1\)/);
    assert.match(line, /baseURL is TROUPE_MODEL_BASE_URL/);
  });

  it('a base URL that is not one, or no model: one line naming the variable, exit 1, nothing sent', {
    timeout: 30_000,
  }, async () => {
    server.reset();
    const malformed = await oneLine(
      run('demo.js', { TROUPE_MODEL_BASE_URL: 'localhost:11434', TROUPE_MODEL: 'llama3.2' }),
    );
    assert.match(malformed, /baseURL is invalid \(got "localhost:11434"\).*TROUPE_MODEL_BASE_URL/);
    const noModel = await oneLine(run('demo.js', { TROUPE_MODEL_BASE_URL: server.baseURL }));
    assert.match(noModel, /TROUPE_MODEL_BASE_URL is set but TROUPE_MODEL is not: set TROUPE_MODEL/);
    assert.equal(server.received.length, 0);
  });
});
