// Agents of the persistence suite's supervisor figures. Each model reads the transcript (one
// scripted step, repeated), so one definition serves thousands of conversations and their restores.
// Workers import this module by URL.
import { defineAgent, defineTool, type Message, ToolResult } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import { z } from 'zod';

/** Asks a person before refunding; on the answer, refunds (re-run once with `ctx.answer`). */
const confirmRefund = defineTool({
  name: 'confirm_refund',
  description: 'Refund after a person confirms',
  parameters: z.object({ amount: z.number() }),
  execute: ({ amount }, ctx) => {
    if (ctx.answer === undefined) return ToolResult.pending({ kind: 'confirm', prompt: `Refund ${amount} EUR?` });
    return ctx.answer.ok ? `refunded ${amount}` : 'not refunded';
  },
});

const lastText = (messages: readonly Message[]): string => {
  const last = messages[messages.length - 1];
  return typeof last?.content === 'string' ? last.content : '';
};

const results = (r: readonly { content: unknown }[]): string => r.map((x) => String(x.content)).join(', ');

/**
 * A parent agent (the supervisor thread): "refund" → its own tool asks; a tool result → reports
 * it; anything else → a short reply (what the idle-heap and RSS figures send).
 */
export const refundDesk = defineAgent({
  name: 'refundDesk',
  module: import.meta.url,
  instructions: 'Refund after asking.',
  tools: [confirmRefund],
  model: new ScriptedModel(
    [
      ({ messages, lastToolResults }) => {
        if (messages[messages.length - 1]?.role === 'tool') return results(lastToolResults);
        if (lastText(messages).includes('refund'))
          return { toolCalls: [{ name: 'confirm_refund', arguments: { amount: 20 } }] };
        return 'ok';
      },
    ],
    { whenExhausted: 'repeat-last' },
  ),
});

/** Level 3 (a worker): its tool asks. */
export const refundClerk = defineAgent({
  name: 'refundClerk',
  module: import.meta.url,
  instructions: 'Refund after asking.',
  tools: [confirmRefund],
  model: new ScriptedModel(
    [
      ({ messages, lastToolResults }) =>
        messages[messages.length - 1]?.role === 'tool'
          ? results(lastToolResults)
          : { toolCalls: [{ name: 'confirm_refund', arguments: { amount: 20 } }] },
    ],
    { whenExhausted: 'repeat-last' },
  ),
});

/** Level 2 (a worker): delegates to the clerk. */
export const refundLead = defineAgent({
  name: 'refundLead',
  module: import.meta.url,
  instructions: 'Delegate the refund.',
  subagents: [refundClerk],
  model: new ScriptedModel(
    [
      ({ messages, lastToolResults }) =>
        messages[messages.length - 1]?.role === 'tool'
          ? results(lastToolResults)
          : { toolCalls: [{ name: 'task', arguments: { subagent: 'refundClerk', instructions: 'refund 20' } }] },
    ],
    { whenExhausted: 'repeat-last' },
  ),
});

/** Level 1 (the supervisor thread): delegates to the lead, so the question is asked two levels down. */
export const refundOffice = defineAgent({
  name: 'refundOffice',
  module: import.meta.url,
  instructions: 'Delegate the refund.',
  subagents: [refundLead],
  model: new ScriptedModel(
    [
      ({ messages, lastToolResults }) =>
        messages[messages.length - 1]?.role === 'tool'
          ? results(lastToolResults)
          : { toolCalls: [{ name: 'task', arguments: { subagent: 'refundLead', instructions: 'refund 20' } }] },
    ],
    { whenExhausted: 'repeat-last' },
  ),
});
