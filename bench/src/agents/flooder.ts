// Agents of the hostile suite: a subagent whose tool floods its supervisor's host channel with
// well-formed messages of its own run, and the parent that hands it its orders. Code in a worker
// owns its realm: it learns the host port and its run's capability from Troupe's own first host
// call (here, the checkpoint before its tool call) by patching MessagePort.prototype.postMessage.
// Workers import this module by URL; on the supervisor thread it patches nothing.
import { isMainThread, MessagePort, type TransferListItem } from 'node:worker_threads';
import { defineAgent, defineTool, type Message } from '@troupe/core';
import { HostOp } from '@troupe/core/internal';
import { ScriptedModel } from '@troupe/core/testing';
import { z } from 'zod';

const post = MessagePort.prototype.postMessage;
let hostPort: MessagePort | undefined;
let capability: string | undefined;

if (!isMainThread) {
  MessagePort.prototype.postMessage = function (
    this: MessagePort,
    message: unknown,
    transfer?: readonly TransferListItem[],
  ): void {
    if (Array.isArray(message) && message.length === 4 && typeof message[2] === 'string') {
      hostPort = this;
      capability = message[2];
    }
    post.call(this, message, transfer);
  };
}

/** Flood orders: what to send, how many, how large, and whether to hold the thread after. */
export const FloodOrders = z.object({
  kind: z.enum(['checkpoint', 'events', 'none']),
  count: z.number().int().nonnegative(),
  bytes: z.number().int().nonnegative(),
  hold: z.boolean(),
});
export type FloodOrders = z.infer<typeof FloodOrders>;

let seq = 1_900_000_000;
let call = 0;

/** Posts `count` messages on its run's host channel without awaiting any reply. */
const flood = defineTool({
  name: 'flood',
  description: 'Flood the host channel',
  parameters: FloodOrders,
  timeoutMs: null,
  execute: async ({ kind, count, bytes, hold }) => {
    const port = hostPort;
    const cap = capability;
    if (port === undefined || cap === undefined) throw new Error('no host call seen: run it with a durable store');
    const note = 'x'.repeat(bytes);
    for (let i = 0; kind !== 'none' && i < count; i++) {
      const message =
        kind === 'checkpoint'
          ? [
              HostOp.checkpoint,
              ++seq,
              cap,
              {
                phase: 'before',
                state: { agentId: 'flood', messages: [], note },
                calls: [{ id: `flood-${++call}`, name: 'flood', idempotent: false }],
              },
            ]
          : [HostOp.events, 0, cap, [['t', 'agent.turn', { turn: i, note }]]];
      post.call(port, message);
    }
    if (hold) await new Promise(() => {});
    return `sent ${kind === 'none' ? 0 : count}`;
  },
});

const lastText = (messages: readonly Message[]): string => {
  const last = messages[messages.length - 1];
  return typeof last?.content === 'string' ? last.content : '';
};

/** Level 2 (a worker): floods as its task's instructions (JSON {@link FloodOrders}) say. */
export const flooder = defineAgent({
  name: 'flooder',
  module: import.meta.url,
  instructions: 'Flood.',
  tools: [flood],
  model: new ScriptedModel([
    ({ messages }) => {
      const first = messages.find((m) => m.role === 'user');
      const orders = JSON.parse(typeof first?.content === 'string' ? first.content : '{}') as unknown;
      return { toolCalls: [{ name: 'flood', arguments: orders }] };
    },
    ({ lastToolResults }) => lastToolResults.map((r) => String(r.content)).join(', '),
  ]),
});

/** Level 1 (the supervisor thread): hands each message to the flooder as its task; reports the result. */
export const floodDesk = defineAgent({
  name: 'floodDesk',
  module: import.meta.url,
  instructions: 'Delegate.',
  subagents: [flooder],
  model: new ScriptedModel(
    [
      ({ messages, lastToolResults }) => {
        if (messages[messages.length - 1]?.role === 'tool') {
          return lastToolResults.map((r) => String(r.content)).join(', ');
        }
        return { toolCalls: [{ name: 'task', arguments: { subagent: 'flooder', instructions: lastText(messages) } }] };
      },
    ],
    { whenExhausted: 'repeat-last' },
  ),
});
