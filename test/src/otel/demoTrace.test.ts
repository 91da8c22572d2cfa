// The demo's traces: printed as a tree, and exported over OTLP/HTTP to a
// collector (here a server on 127.0.0.1 that this test starts and stops), in
// one run of the whole demo with both asked for.
//
// It shares the machine with other test files: the demo holds its timing
// claims (a cancel seen within 5 ms, the fan-out's speed-up) to a bare thread
// measured between its own runs, and says so when other processes hold the
// cores (“the machine is busy”) rather than failing; its strict run is the
// README's first command, alone on the machine.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { EXAMPLES_DIST, startProcess } from '../examples/startProcess.js';
import { tempDir } from '../persistence/sqliteFiles.js';

describe('pnpm demo --trace, with OTEL_EXPORTER_OTLP_ENDPOINT set', { timeout: 90_000 }, () => {
  /** What the collector received: each POST /v1/traces body. */
  const bodies: unknown[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      body += chunk;
    });
    req.on('end', () => {
      if (req.method === 'POST' && req.url === '/v1/traces') bodies.push(JSON.parse(body));
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  const dir = tempDir('demo-trace');
  let lines: readonly string[] = [];
  let output = '';

  before(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const demo = startProcess(join(EXAMPLES_DIST, 'demo.js'), {
      TROUPE_DEMO_TRACE: '1',
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
      TROUPE_DEMO_DIR: dir.dir,
    });
    try {
      const exit = await demo.exited;
      lines = demo.lines;
      output = `${demo.lines.join('\n')}\n${demo.stderr()}`;
      assert.deepEqual(exit, { code: 0, signal: null }, output);
    } finally {
      demo.child.kill('SIGKILL');
    }
  });
  after(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    dir.remove();
  });

  it('prints each scene with its agents, tool and model calls under it', () => {
    const start = lines.findIndex((l) => l.startsWith('Trace (one tree per scene'));
    assert.ok(start > 0, output);
    const tree = lines.slice(start + 1);
    const fanOut = tree.findIndex((l) => l.trim().startsWith('scene 1: fan-out'));
    const next = tree.findIndex((l) => l.trim().startsWith('scene 2:'));
    const scene = tree.slice(fanOut + 1, next).map((l) => l.replace(/ {2}\+.*$/, '').trimEnd());
    assert.equal(scene[0], '     invoke_agent dispatcher [done] thread 0', output);
    // Four counters per round (a round a busy machine disturbed is measured once more).
    const rounds = scene.filter((l) => l === '     invoke_agent dispatcher [done] thread 0').length;
    assert.ok(rounds === 1 || rounds === 2, output);
    assert.equal(
      scene.filter((l) => /^ {9}invoke_agent counter \[done\] thread [1-9]/.test(l)).length,
      4 * rounds,
      output,
    );
    assert.equal(scene.filter((l) => /^ {7}execute_tool task \[ok\]$/.test(l)).length, 4 * rounds, output);
    const crash = tree.findIndex((l) => l.trim().startsWith('scene 8: crash'));
    assert.match(tree.slice(crash).join('\n'), /invoke_agent exporter \[crashed\] thread \d+/);
  });

  it('exports its spans over OTLP/HTTP: every span the bridge made, and one per scene', () => {
    const exported = Number(/^(\d+) spans exported to /m.exec(output)?.[1]);
    const names = bodies.flatMap((b) =>
      (b as { resourceSpans: { scopeSpans: { spans: { name: string }[] }[] }[] }).resourceSpans.flatMap((r) =>
        r.scopeSpans.flatMap((s) => s.spans.map((span) => span.name)),
      ),
    );
    assert.ok(names.includes('invoke_agent coordinator') && names.includes('invoke_agent analyst'), output);
    assert.ok(names.includes('execute_tool task') && names.some((n) => n.startsWith('chat ')));
    assert.equal(names.length, exported + 10, `${names.length} received, ${exported} reported`);
  });
});
