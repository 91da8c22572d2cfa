// Agents whose tools are the fixture MCP server's over Streamable HTTP. The
// test starts the server, then sets its URL in the environment, then imports
// this module (and starts the pool, whose workers copy the environment).
import { defineAgent, InvalidArgumentError } from '@troupe/core';
import { mcpServer } from '@troupe/mcp';
import { callerModel, DEADLINES } from './callerModel.js';

/** The running fixture server's MCP endpoint. */
export const URL_VARIABLE = 'TROUPE_TEST_MCP_URL';

const url = process.env[URL_VARIABLE];
if (url === undefined || url === '') {
  throw new InvalidArgumentError(`${URL_VARIABLE} is not set: start the fixture server before importing this module`);
}

/** This thread's connection to the HTTP server (the test closes the host's). */
export const httpServer = mcpServer({ name: 'fixture-http', url });

export const httpCaller = defineAgent({
  name: 'mcp-http-caller',
  module: import.meta.url,
  instructions: '',
  model: callerModel(),
  tools: await httpServer.tools({ tools: DEADLINES }),
});
