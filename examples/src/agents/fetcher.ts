// An I/O-bound subagent: its tool waits on a slow upstream the way a `fetch`
// would, and gives up as soon as its run is cancelled.
import { defineAgent, defineTool } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import { z } from 'zod';
import { lastUserMessage } from './lastUserMessage.js';
import { demoModel } from './model.js';

const callUpstream = defineTool({
  name: 'call_upstream',
  description: 'Call a slow upstream service',
  parameters: z.object({ ms: z.number().int().min(0).max(60_000) }),
  timeoutMs: 60_000,
  // Stands in for `fetch(url, { signal: ctx.signal })`: the signal aborts when
  // the run is cancelled (by its parent, a deadline, or a shutdown), and the
  // timer is cleared so nothing keeps running after the call ended.
  execute: ({ ms }, ctx) =>
    new Promise<string>((resolve, reject) => {
      const signal = ctx.signal;
      if (signal.aborted) {
        reject(signal.reason);
        return;
      }
      const onAbort = (): void => {
        clearTimeout(timer);
        reject(signal.reason);
      };
      const timer = setTimeout(() => {
        signal.removeEventListener('abort', onAbort);
        resolve(`upstream answered after ${ms} ms`);
      }, ms);
      signal.addEventListener('abort', onAbort, { once: true });
    }),
});

/** Calls the upstream; its task is how many milliseconds the upstream takes. */
export const fetcher = defineAgent({
  name: 'fetcher',
  description: 'Calls a slow upstream service',
  module: import.meta.url,
  instructions:
    'Your task is a number of milliseconds: call call_upstream once with ms set to it, then answer with its result.',
  tools: [callUpstream],
  model: demoModel(
    new ScriptedModel([
      ({ messages }) => ({
        toolCalls: [{ name: 'call_upstream', arguments: { ms: Number(lastUserMessage(messages)) } }],
      }),
      ({ lastToolResults }) => {
        const result = lastToolResults[0];
        return result?.isError ? `failed: ${JSON.stringify(result.content)}` : String(result?.content);
      },
    ]),
    { temperature: 0 },
  ),
});
