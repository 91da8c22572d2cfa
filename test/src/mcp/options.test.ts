// @troupe/mcp's bad input, one rule per test: server options, tool options
// (checked against what the server lists), and servers that cannot be
// started or reached, each a typed error that says what to do.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { type AddressInfo, createServer } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { isTroupeError } from '@troupe/core';
import { type McpServerHandle, type McpServerOptions, mcpServer, resolveMcpServerOptions } from '@troupe/mcp';
import { SERVER_SCRIPT } from './HttpServerProcess.js';

const refused = (options: unknown, pattern: RegExp): void => {
  assert.throws(
    () => resolveMcpServerOptions(options as McpServerOptions),
    (error: unknown) => isTroupeError(error, 'ERR_INVALID_ARGUMENT') && pattern.test((error as Error).message),
  );
};

describe('mcpServer options', () => {
  it('needs a command or a url', () =>
    refused({ name: 'x' }, /neither command nor url is given: pass command \(and args\).*or url/));
  it('takes a command or a url, not both', () =>
    refused({ name: 'x', command: 'node', url: 'http://127.0.0.1:1/mcp' }, /both command and url are given/));
  it('a name of letters, digits, _ and -', () => refused({ name: 'my server', command: 'node' }, /name is invalid/));
  it('an http(s) url', () => refused({ name: 'x', url: 'ftp://host/mcp' }, /url is invalid .*http\(s\) URL/));
  it('no unknown option (and says which a transport takes)', () =>
    refused(
      { name: 'x', url: 'http://127.0.0.1:1/mcp', command2: 1 },
      /unknown option command2: an HTTP server takes/,
    ));
  it('stdio options do not go with a url', () =>
    refused({ name: 'x', url: 'http://127.0.0.1:1/mcp', args: [] }, /unknown option args/));
  it('never repeats header values', () => {
    assert.throws(
      () => resolveMcpServerOptions({ name: 'x', url: 'http://127.0.0.1:1/mcp', headers: { a: 42 as never } }),
      (error: unknown) => /headers is invalid \(got \(hidden\)\)/.test((error as Error).message),
    );
  });
  it('a whole number of ms for connectTimeoutMs', () =>
    refused({ name: 'x', command: 'node', connectTimeoutMs: 1.5 }, /connectTimeoutMs is invalid/));
  it('defaults: stderr copied, 30 s to connect', () => {
    const o = resolveMcpServerOptions({ name: 'x', command: 'node' });
    assert.equal(o.transport, 'stdio');
    assert.equal(o.transport === 'stdio' ? o.stderr : '', 'inherit');
    assert.equal(o.connectTimeoutMs, 30_000);
  });
});

describe('tools() options, against what a real server lists', { timeout: 60_000 }, () => {
  let server: McpServerHandle;
  before(() => {
    server = mcpServer({ name: 'opts', command: process.execPath, args: [SERVER_SCRIPT], stderr: 'ignore' });
  });
  after(() => server.close());

  const rejects = (options: Parameters<McpServerHandle['tools']>[0], pattern: RegExp) =>
    assert.rejects(
      server.tools(options),
      (error: unknown) => isTroupeError(error, 'ERR_INVALID_ARGUMENT') && pattern.test((error as Error).message),
    );

  it('include names only tools the server lists (and says which it has)', () =>
    rejects(
      { include: ['echo', 'ecoh'] },
      /include names "ecoh", which the server does not list \(it has "echo", "add"/,
    ));
  it('per-tool settings name only tools the server lists', () =>
    rejects({ tools: { nope: { requiresApproval: true } } }, /tools names "nope"/));
  it('per-tool settings have no unknown keys', () =>
    rejects({ tools: { echo: { approval: true } as never } }, /unknown option approval in tools\.echo/));
  it('a prefix of letters, digits, _ and -', () => rejects({ prefix: 'files.' }, /prefix is invalid/));
  it('two tools may not end up with one name', () =>
    rejects({ tools: { add: { name: 'echo' } } }, /the tools "echo" and "add" would both be named "echo"/));
  it('include, prefix and settings apply', async () => {
    const tools = await server.tools({
      include: ['echo', 'notes.read'],
      prefix: 'fx_',
      timeoutMs: 5_000,
      tools: { echo: { requiresApproval: true, retries: 2, idempotent: true } },
    });
    assert.deepEqual(
      tools.map((t) => [t.name, t.requiresApproval, t.timeoutMs, t.retries, t.idempotent]),
      [
        ['fx_echo', true, 5_000, 2, true],
        ['fx_notes_read', false, 5_000, 0, false],
      ],
    );
  });
  it('after close(), the handle refuses with ERR_CLOSED', async () => {
    const closing = mcpServer({ name: 'closing', command: process.execPath, args: [SERVER_SCRIPT], stderr: 'ignore' });
    await closing.listTools();
    await closing.close();
    await closing.close();
    await assert.rejects(closing.tools(), (error: unknown) => isTroupeError(error, 'ERR_CLOSED'));
  });
});

describe('servers that cannot be started or reached', { timeout: 60_000 }, () => {
  it('a command that does not exist: ERR_MCP_CONNECTION naming it', async () => {
    const server = mcpServer({ name: 'ghost', command: 'troupe-no-such-command-xyz' });
    await assert.rejects(
      server.tools(),
      (error: unknown) =>
        isTroupeError(error, 'ERR_MCP_CONNECTION') &&
        /cannot start the MCP server "ghost" .*the command "troupe-no-such-command-xyz" was not found \(ENOENT\): check command and PATH/.test(
          (error as Error).message,
        ),
    );
    await server.close();
  });
  it('a command that is not an MCP server: ERR_MCP_CONNECTION with what it wrote to stderr', async () => {
    const server = mcpServer({
      name: 'broken',
      command: process.execPath,
      args: ['-e', 'console.error("boom: no config"); process.exit(2)'],
      stderr: 'ignore',
    });
    await assert.rejects(
      server.tools(),
      (error: unknown) =>
        isTroupeError(error, 'ERR_MCP_CONNECTION') &&
        /did not complete the MCP handshake .*its stderr said: boom: no config/.test((error as Error).message),
    );
    await server.close();
  });
  it('a URL where nothing listens: ERR_MCP_CONNECTION, and a later call tries again', async () => {
    // A port that was free a moment ago, and is closed now.
    const probe = createServer().listen(0, '127.0.0.1');
    await once(probe, 'listening');
    const { port } = probe.address() as AddressInfo;
    probe.close();
    await once(probe, 'close');
    const server = mcpServer({ name: 'nobody', url: `http://127.0.0.1:${port}/mcp` });
    for (let i = 0; i < 2; i++) {
      await assert.rejects(
        server.listTools(),
        (error: unknown) =>
          isTroupeError(error, 'ERR_MCP_CONNECTION') &&
          new RegExp(
            `cannot reach the MCP server "nobody" at http://127\\.0\\.0\\.1:${port}/mcp \\(ECONNREFUSED\\)`,
          ).test((error as Error).message),
      );
    }
    await server.close();
  });
});
