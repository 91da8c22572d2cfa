// Subagents whose tools need a person: one asks a question (a suspension),
// one needs approval before it may run.
import { defineAgent, defineTool, ToolResult } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import { z } from 'zod';
import { lastUserMessage } from './lastUserMessage.js';
import { demoModel } from './model.js';
import { bump, Probe, type ProbeContext } from './probe.js';

const report = ({ lastToolResults }: { readonly lastToolResults: readonly { content: unknown; isError: boolean }[] }) =>
  JSON.stringify(lastToolResults.map((r) => (r.isError ? { error: r.content } : r.content)));

const deploy = defineTool({
  name: 'deploy',
  description: 'Deploy a service, asking a person where to',
  parameters: z.object({ service: z.string() }),
  execute: ({ service }, ctx: ProbeContext) => {
    bump(ctx, Probe.deployRuns);
    // First run: no answer yet, so ask. The run stops here and its worker is
    // freed; when the host answers, this tool runs once more with `ctx.answer`.
    if (ctx.answer === undefined) {
      return ToolResult.pending({ kind: 'input', prompt: `Which environment should ${service} go to?` });
    }
    const env = (ctx.answer.data as { env?: unknown } | undefined)?.env;
    if (typeof env !== 'string') return ToolResult.error('the answer named no environment');
    return `deployed ${service} to ${env}`;
  },
});

/** Deploys the service named by its task, after asking which environment. */
export const deployer = defineAgent({
  name: 'deployer',
  description: 'Deploys services',
  module: import.meta.url,
  instructions: 'Call deploy once with the service you are given, then answer with only a JSON array of its result.',
  tools: [deploy],
  model: demoModel(
    new ScriptedModel([
      ({ messages }) => ({ toolCalls: [{ name: 'deploy', arguments: { service: lastUserMessage(messages) } }] }),
      report,
    ]),
    { temperature: 0 },
  ),
});

const refund = defineTool({
  name: 'refund',
  description: 'Refund an order',
  parameters: z.object({ order: z.string(), amount: z.number().positive() }),
  // The host's approval handler decides, on the supervisor thread, before anything runs.
  requiresApproval: true,
  execute: ({ order, amount }, ctx: ProbeContext) => {
    bump(ctx, Probe.refundRuns);
    return `refunded ${amount} on ${order}`;
  },
});

/** Issues the refunds listed in its task (`<order>=<amount>, ...`), all in one turn. */
export const refunds = defineAgent({
  name: 'refunds',
  description: 'Issues refunds',
  module: import.meta.url,
  instructions:
    'Your task lists refunds as "<order>=<amount>", separated by commas. Call refund once per item, all in one turn, ' +
    'then answer with only a JSON array of the results in order (an error result as {"error": <it>}).',
  tools: [refund],
  model: demoModel(
    new ScriptedModel([
      ({ messages }) => ({
        toolCalls: lastUserMessage(messages)
          .split(',')
          .map((item) => {
            const [order = '', amount = '0'] = item.trim().split('=');
            return { name: 'refund', arguments: { order, amount: Number(amount) } };
          }),
      }),
      report,
    ]),
    { temperature: 0 },
  ),
});
