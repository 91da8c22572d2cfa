// Agents whose tools are the fixture MCP server's, over stdio. Every thread
// that imports this module (the test's, and each worker that runs one of
// these agents) starts its own server process and connects to it: the
// module lists the tools at its top level. The observer's address comes
// through the environment, which workers copy when they start.
import { defineAgent } from '@troupe/core';
import { mcpServer } from '@troupe/mcp';
import { callerModel, DEADLINES, OBSERVER_VARIABLE } from './callerModel.js';
import { SERVER_SCRIPT } from './HttpServerProcess.js';

/** This thread's connection to the stdio server (the test closes the host's). */
export const stdioServer = mcpServer({
  name: 'fixture',
  command: process.execPath,
  args: [SERVER_SCRIPT],
  env: { TROUPE_MCP_OBSERVER: process.env[OBSERVER_VARIABLE] ?? '' },
  stderr: 'ignore',
});

export const stdioCaller = defineAgent({
  name: 'mcp-stdio-caller',
  module: import.meta.url,
  instructions: '',
  model: callerModel(),
  tools: await stdioServer.tools({ tools: DEADLINES }),
});

/** The same server, with `echo` held for approval. */
export const approvalCaller = defineAgent({
  name: 'mcp-approval-caller',
  module: import.meta.url,
  instructions: '',
  model: callerModel(),
  tools: await stdioServer.tools({ include: ['echo', 'pid'], tools: { echo: { requiresApproval: true } } }),
});
