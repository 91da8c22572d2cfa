// The MCP server of the `mcp` suite, started as a child process (stdio):
// one tool, `echo`, built with the official SDK. It exits when its stdin
// closes, so it never outlives the bench.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

const server = new McpServer({ name: 'troupe-bench', version: '1.0.0' });
server.registerTool('echo', { description: 'Echo the text', inputSchema: { text: z.string() } }, async ({ text }) => ({
  content: [{ type: 'text', text }],
}));
process.stdin.on('end', () => process.exit(0));
await server.connect(new StdioServerTransport());
