// The agent of the install test's consumer: a project outside the workspace
// that installed Troupe from its tarballs. Its one tool says which thread
// runs it and for whom, and records what it did through a ContextUpdate.
import { threadId } from 'node:worker_threads';
import { ContextUpdate, defineAgent, defineTool, type ToolContext, ToolResult } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import { z } from 'zod';

const whereAmI = defineTool({
  name: 'where_am_i',
  description: 'Say which thread runs this tool, and for which tenant',
  parameters: z.object({ label: z.string().min(1) }),
  // The scope it reads: a supervisor whose scope lacks tenantId cannot run this agent (tsc says so).
  execute: ({ label }, ctx: ToolContext<{ tenantId: string }>) => {
    const { tenantId } = ctx.scope;
    return ToolResult.ok({ label, tenantId, threadId }, ContextUpdate.empty().append('labels', label));
  },
});

/** Calls `where_am_i` once and answers with what it returned. */
export const probe = defineAgent({
  name: 'probe',
  description: 'Reports the thread it runs on',
  module: import.meta.url,
  instructions: 'Call where_am_i, then answer with its result.',
  tools: [whereAmI],
  model: new ScriptedModel([
    { toolCalls: [{ name: 'where_am_i', arguments: { label: 'installed' } }] },
    ({ lastToolResults }) => JSON.stringify(lastToolResults[0]?.content),
  ]),
});
