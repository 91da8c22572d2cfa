// `pnpm bench mcp`: what an MCP tool call costs from a subagent's worker,
// where @troupe/mcp keeps one connection per thread, against the same call
// from a bare MCP SDK client on one thread — and what the other place for the
// client (the supervisor thread, behind a host operation) would add to every
// call: a worker ⇄ main thread round trip, measured here as its floor (a bare
// postMessage echo of a call-sized message). Also what one connection per
// thread costs once: importing the package, starting a stdio server and
// listing its tools, in a fresh worker.
import { Worker } from 'node:worker_threads';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { ToolContext } from '@troupe/core';
import { createSupervisor } from '@troupe/supervisor';
import type { Figure, SuiteBody, SuiteContext } from '../Suite.js';
import { median, quantile, round } from '../stats.js';

const ECHO = new URL('../workers/echoWorker.js', import.meta.url);

/** `calls` calls of `echo` from a bare SDK client on this thread, in µs each. */
async function bareCalls(client: Client, calls: number): Promise<number[]> {
  const samples: number[] = [];
  for (let i = 0; i < calls; i++) {
    const start = performance.now();
    const result = await client.callTool({ name: 'echo', arguments: { text: 'ping' } });
    samples.push((performance.now() - start) * 1000);
    if (result.isError === true) throw new Error('echo failed');
  }
  return samples;
}

/** A worker ⇄ this thread round trip of a call-sized message (what a host operation adds per call, at least). */
async function hopSamples(count: number): Promise<number[]> {
  const worker = new Worker(ECHO);
  const message = {
    op: 'mcp.call',
    server: 'bench',
    tool: 'echo',
    arguments: { text: 'ping' },
    capability: 'x'.repeat(24),
  };
  const samples: number[] = [];
  try {
    for (let i = 0; i < count; i++) {
      const start = performance.now();
      await new Promise<void>((resolve) => {
        worker.once('message', () => resolve());
        worker.postMessage(message);
      });
      samples.push((performance.now() - start) * 1000);
    }
  } finally {
    await worker.terminate();
  }
  return samples;
}

async function run(ctx: SuiteContext): Promise<Figure[]> {
  const calls = ctx.quick ? 200 : 1_000;
  const rounds = ctx.quick ? 3 : 5;
  const agents = await import('../agents/mcpCaller.js');
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [agents.MCP_SERVER_SCRIPT],
    stderr: 'ignore',
  });
  const client = new Client({ name: 'bench', version: '1.0.0' });
  await client.connect(transport);
  const supervisor = createSupervisor({ pool: { threads: 1 } });
  try {
    await supervisor.pool.ready();
    const here: ToolContext = { signal: new AbortController().signal, timeoutMs: undefined } as unknown as ToolContext;
    const bare: number[] = [];
    const worker: number[] = [];
    const adapterHere: number[] = [];
    const bareInWorker: number[] = [];
    let connect: { importMs: number; connectMs: number } | undefined;
    // Warm: the worker's first run loads the module (and connects), the client's first calls warm the server.
    await bareCalls(client, 50);
    await agents.timeEchoCalls(50, here);
    await supervisor.spawn(agents.mcpCaller, { input: '50', scope: {} });
    for (let r = 0; r < rounds; r++) {
      ctx.progress(
        `mcp: round ${r + 1}/${rounds}: ${calls} echo calls each, bare client / from a worker / the adapter here`,
      );
      bare.push(...(await bareCalls(client, calls)));
      const outcome = await supervisor.spawn(agents.mcpCaller, { input: String(calls), scope: {} });
      if (outcome.status !== 'done') throw new Error(`the MCP subagent ended ${outcome.status}`);
      const answer = JSON.parse(String(outcome.result)) as {
        samples: number[];
        bare: number[];
        connect: { importMs: number; connectMs: number };
      };
      worker.push(...answer.samples);
      bareInWorker.push(...answer.bare);
      connect ??= answer.connect;
      adapterHere.push(...(await agents.timeEchoCalls(calls, here)));
    }
    ctx.progress('mcp: a worker ⇄ main thread round trip of a call-sized message');
    const hop = await hopSamples(ctx.quick ? 500 : 2_000);
    const a = median(bare);
    const b = median(worker);
    return [
      {
        suite: 'mcp',
        name: 'mcp.call_overhead_us',
        value: round(b - a),
        unit: 'µs',
        baseline: { name: 'the same call from a bare MCP SDK client on one thread (µs, median)', value: round(a) },
        ratio: round(b / a),
        detail: {
          from_worker_us: round(b),
          bare_client_us: round(a),
          adapter_on_main_thread_us: round(median(adapterHere)),
          bare_client_in_the_worker_us: round(median(bareInWorker)),
          from_worker_p95_us: round(quantile(worker, 0.95)),
          bare_client_p95_us: round(quantile(bare, 0.95)),
          host_op_floor_us: round(median(hop)),
          per_thread_import_ms: round(connect?.importMs ?? Number.NaN),
          per_thread_connect_ms: round(connect?.connectMs ?? Number.NaN),
          calls: worker.length,
        },
      },
    ];
  } finally {
    await supervisor.close({ timeoutMs: 5_000 });
    await agents.benchServer.close();
    await client.close();
  }
}

export const mcpSuite: SuiteBody = {
  run,
};
