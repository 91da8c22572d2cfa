// an MCP server's tools as an agent's tools.
import { defineAgent } from '@troupe/core';
import { mcpServer } from '@troupe/mcp';
import { claude } from './claude.js';

// One connection per thread that imports this module: each worker that runs the agent starts its own.
export const docs = mcpServer({
  name: 'docs',
  command: 'npx',
  args: ['-y', '@modelcontextprotocol/server-filesystem', '/srv/docs'],
});

export const librarian = defineAgent({
  name: 'librarian',
  module: import.meta.url,
  instructions: 'Answer from the documents.',
  model: claude.model,
  tools: await docs.tools({
    include: ['read_text_file', 'search_files', 'write_file'],
    timeoutMs: 60_000,
    tools: { write_file: { requiresApproval: true } },
  }),
});
