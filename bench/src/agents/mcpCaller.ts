// The subagent of the `mcp` suite: in each thread that loads this module,
// imports @troupe/mcp, starts the bench's MCP server over stdio and lists its
// tools (timed: what one connection per thread costs), then, asked to, calls
// its `echo` tool back to back through the Troupe tool (argument check, the
// SDK client's call with the run's signal, the result mapped) and returns
// each call's time in µs.
import { fileURLToPath } from 'node:url';
import { type AnyTool, defineAgent, defineTool, type ToolContext } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import { z } from 'zod';

/** The compiled MCP server. */
export const MCP_SERVER_SCRIPT = fileURLToPath(new URL('../workers/mcpEchoServer.js', import.meta.url));

const t0 = performance.now();
const { mcpServer } = await import('@troupe/mcp');
const t1 = performance.now();
/** This thread's connection to the bench server (the suite closes the main thread's). */
export const benchServer = mcpServer({
  name: 'bench',
  command: process.execPath,
  args: [MCP_SERVER_SCRIPT],
  stderr: 'ignore',
});
const [echo] = (await benchServer.tools({ include: ['echo'], timeoutMs: 10_000 })) as [AnyTool];
const t2 = performance.now();
/** This thread's costs of its connection: importing the package, starting the server and listing its tools. */
export const connectCost = { importMs: t1 - t0, connectMs: t2 - t1 };
/** The Troupe tool of the server's `echo`. */
export const echoTool = echo;

/** `calls` calls of `echo` through the Troupe tool, one after another (the call's context is `ctx`, with a signal of its own); each one's time in µs. */
export async function timeEchoCalls(calls: number, ctx: ToolContext): Promise<number[]> {
  const samples: number[] = [];
  for (let i = 0; i < calls; i++) {
    const start = performance.now();
    const args = echo.parameters.parse({ text: 'ping' });
    // A signal per call, as the executor gives each call its own (the SDK keeps its listener on it).
    const result = await echo.execute(args, Object.create(ctx, { signal: { value: new AbortController().signal } }));
    samples.push((performance.now() - start) * 1000);
    if ((result as { status?: string }).status !== 'ok') throw new Error(`echo failed: ${JSON.stringify(result)}`);
  }
  return samples;
}

/** The same calls from a bare SDK client of this thread's own (what the thread itself costs, without the Troupe tool). */
export async function timeBareCalls(calls: number): Promise<number[]> {
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
  const client = new Client({ name: 'bench-bare', version: '1.0.0' });
  await client.connect(
    new StdioClientTransport({ command: process.execPath, args: [MCP_SERVER_SCRIPT], stderr: 'ignore' }),
  );
  try {
    const samples: number[] = [];
    for (let i = 0; i < calls; i++) {
      const start = performance.now();
      await client.callTool({ name: 'echo', arguments: { text: 'ping' } });
      samples.push((performance.now() - start) * 1000);
    }
    return samples;
  } finally {
    await client.close();
  }
}

const timeCalls = defineTool({
  name: 'time_mcp_calls',
  description: 'Time calls of the MCP echo tool',
  parameters: z.object({ calls: z.number().int().min(1) }),
  timeoutMs: null,
  execute: async ({ calls }, ctx) => ({
    samples: await timeEchoCalls(calls, ctx),
    bare: await timeBareCalls(calls),
    connect: connectCost,
  }),
});

/** Times `Number(input)` calls on its thread and answers with them as JSON. */
export const mcpCaller = defineAgent({
  name: 'mcpCaller',
  module: import.meta.url,
  instructions: '',
  model: new ScriptedModel([
    ({ messages }) => ({
      toolCalls: [{ name: 'time_mcp_calls', arguments: { calls: Number(messages.at(-1)?.content ?? 1) } }],
    }),
    ({ lastToolResults }) => JSON.stringify(lastToolResults[0]?.content),
  ]),
  tools: [timeCalls],
});
