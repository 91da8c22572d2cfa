// The daemon example as an operator runs it: a child process, a readiness
// line on stdout, SIGTERM, a graceful exit. Synchronised on its output only.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { EXAMPLES_DIST, startProcess } from './startProcess.js';

const DAEMON = join(EXAMPLES_DIST, 'daemon.js');

async function postTask(port: number, message: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`http://127.0.0.1:${port}/tasks`, {
    method: 'POST',
    body: JSON.stringify({ tenantId: 'acme', userId: 'u-1', message }),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/** Index of the first line matching `pattern` (-1 if none). */
function indexOf(lines: readonly string[], pattern: RegExp): number {
  return lines.findIndex((line) => pattern.test(line));
}

/** A reply without its token counts. */
function bare(reply: unknown): Record<string, unknown> {
  const { usage: _usage, totalUsage: _total, ...rest } = reply as Record<string, unknown>;
  return rest;
}

describe('examples/daemon', { timeout: 30_000 }, () => {
  it('SIGTERM: refuses new work, lets the in-flight run finish, stops every worker, exits 0', async (t) => {
    const daemon = startProcess(DAEMON, { TROUPE_CLOSE_TIMEOUT_MS: '10000' });
    t.after(() => daemon.child.kill('SIGKILL'));
    const port = Number((await daemon.line(/ready http:\/\/127\.0\.0\.1:(\d+)/))[1]);

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
      shuttingDown < indexOf(lines, /req-1 done in/),
      `the run was still in flight when the shutdown began:\n${lines.join('\n')}`,
    );
    assert.ok(indexOf(lines, /supervisor closed in \d+ ms: 0 threads, 0 running, 0 agents/) > shuttingDown);
    assert.ok(indexOf(lines, /http server closed; bye/) > shuttingDown);
    assert.equal(indexOf(lines, /leaked/), -1);
    assert.equal(daemon.stderr(), '');
  });

  it('SIGTERM with a run past the close timeout: the run is cancelled (shutdown) and the daemon still exits 0', async (t) => {
    const daemon = startProcess(DAEMON, { TROUPE_CLOSE_TIMEOUT_MS: '50' });
    t.after(() => daemon.child.kill('SIGKILL'));
    const port = Number((await daemon.line(/ready http:\/\/127\.0\.0\.1:(\d+)/))[1]);

    const inFlight = postTask(port, 'fetcher: 30000');
    await daemon.line(/-sub-1 spawned \(fetcher/);
    daemon.child.kill('SIGTERM');

    const { status, body } = await inFlight;
    assert.equal(status, 200);
    assert.deepEqual(bare(body.reply), { status: 'cancelled', reason: 'shutdown' });
    assert.deepEqual(await daemon.exited, { code: 0, signal: null }, daemon.stderr());
    const lines = daemon.lines;
    assert.ok(
      indexOf(lines, /-sub-1 cancelled \(parent\)/) > indexOf(lines, /SIGTERM: shutting down/),
      lines.join('\n'),
    );
    assert.ok(indexOf(lines, /supervisor closed in \d+ ms: 0 threads, 0 running/) >= 0, lines.join('\n'));
  });

  it('a second signal during the drain tears down at once: the run ends cancelled (forced), exit 0', async (t) => {
    const daemon = startProcess(DAEMON, { TROUPE_CLOSE_TIMEOUT_MS: '10000' });
    t.after(() => daemon.child.kill('SIGKILL'));
    const port = Number((await daemon.line(/ready http:\/\/127\.0\.0\.1:(\d+)/))[1]);

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
    const daemon = startProcess(DAEMON);
    t.after(() => daemon.child.kill('SIGKILL'));
    const port = Number((await daemon.line(/ready http:\/\/127\.0\.0\.1:(\d+)/))[1]);
    const response = await fetch(`http://127.0.0.1:${port}/tasks`, {
      method: 'POST',
      body: JSON.stringify({ userId: 'u-1', message: 'analyst: checkout' }),
    });
    assert.equal(response.status, 400);
    assert.match(((await response.json()) as { error: string }).error, /scope\.tenantId/);
    daemon.child.kill('SIGINT');
    assert.deepEqual(await daemon.exited, { code: 0, signal: null }, daemon.stderr());
    assert.ok(indexOf(daemon.lines, /SIGINT: shutting down/) >= 0);
  });
});
