import { ContextUpdate, defineAgent, defineTool, type ToolContext, ToolResult } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import { z } from 'zod';

// What the tool reads of the scope and of the host's toolContext: the
// supervisor that runs these agents must provide both (checked by tsc).
type OrdersContext = ToolContext<{ tenantId: string }, { requestId: string }>;

// A tool: zod parameters, one context holding the three channels, an optional ContextUpdate.
const lookupOrder = defineTool({
  name: 'lookup_order',
  description: 'Find an order of the current tenant',
  parameters: z.object({ orderId: z.string() }),
  execute: ({ orderId }, ctx: OrdersContext) => {
    const order = { orderId, tenantId: ctx.scope.tenantId, requestId: ctx.requestId, status: 'delivered' };
    return ToolResult.ok(order, ContextUpdate.empty().append('ordersSeen', orderId));
  },
});

// A tool that asks a person first: the run suspends and its worker is freed.
const refund = defineTool({
  name: 'refund',
  description: 'Refund an order once a person confirms',
  parameters: z.object({ orderId: z.string() }),
  execute: ({ orderId }, ctx) => {
    if (ctx.answer === undefined) return ToolResult.pending({ kind: 'confirm', prompt: `Refund ${orderId}?` });
    return `refunded ${orderId}`; // re-run exactly once, with the answer
  },
});

// A subagent runs on a worker thread, which imports this module by its URL.
export const orders = defineAgent({
  name: 'orders',
  description: 'Looks up and refunds orders',
  module: import.meta.url,
  instructions: 'Handle the order you are given.',
  tools: [lookupOrder, refund],
  // A scripted stand-in for an LLM; any { generate({ messages, tools, signal }) } will do.
  model: new ScriptedModel([
    { toolCalls: [{ name: 'lookup_order', arguments: { orderId: 'A-1' } }] },
    { toolCalls: [{ name: 'refund', arguments: { orderId: 'A-1' } }] },
    ({ lastToolResults }) => String(lastToolResults[0]?.content),
  ]),
});

// A parent agent runs on the supervisor thread and delegates with its built-in `task` tool.
export const assistant = defineAgent({
  name: 'assistant',
  module: import.meta.url,
  instructions: 'Delegate order work to the orders agent.',
  subagents: [orders],
  mergeMetadataFrom: ['orders'],
  model: new ScriptedModel([
    { toolCalls: [{ name: 'task', arguments: { subagent: 'orders', instructions: 'Refund order A-1' } }] },
    ({ lastToolResults }) => String(lastToolResults[0]?.content),
  ]),
});
