// The AI SDK driven through `generateText` with tools and `stopWhen`, with a hand-written
// LanguageModelV3 (no network; MockLanguageModelV3 would record every call and grow).
import { generateText, type LanguageModel, stepCountIs, type ToolSet, tool } from 'ai';
import { z } from 'zod';
import { burn, burnChecking } from './burn.js';
import type { Peer } from './Peer.js';
import { installedVersion } from './version.js';

type ModelV3 = Extract<LanguageModel, { readonly specificationVersion: 'v3' }>;
type Generated = Awaited<ReturnType<ModelV3['doGenerate']>>;

interface Call {
  readonly name: string;
  readonly args: unknown;
}

const usage: Generated['usage'] = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};

/** Asks `calls` on its first step; once a tool message is in its prompt, answers `done`. */
function scriptedModel(calls: readonly Call[]): ModelV3 {
  return {
    specificationVersion: 'v3',
    provider: 'scripted',
    modelId: 'scripted',
    supportedUrls: {},
    async doGenerate({ prompt }) {
      if (prompt.some((m) => m.role === 'tool')) {
        return {
          content: [{ type: 'text', text: 'done' }],
          finishReason: { unified: 'stop', raw: 'stop' },
          usage,
          warnings: [],
        };
      }
      return {
        content: calls.map((c, i) => ({
          type: 'tool-call' as const,
          toolCallId: `call_${i}`,
          toolName: c.name,
          input: JSON.stringify(c.args),
        })),
        finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
        usage,
        warnings: [],
      };
    },
    async doStream() {
      throw new Error('peers bench: the scripted model does not stream');
    },
  };
}

const n = z.object({ n: z.number() });
const trivialTools = { echo: tool({ description: 'echo', inputSchema: n, execute: async ({ n }) => `ok ${n}` }) };
const trivialModel = scriptedModel([{ name: 'echo', args: { n: 1 } }]);
const burnTools = { burn: tool({ description: 'burn CPU', inputSchema: n, execute: async ({ n }) => burn(n) }) };

async function agentLoop(model: ModelV3, tools: ToolSet, extra: { abortSignal?: AbortSignal; timeout?: number } = {}) {
  return generateText({ model, prompt: 'go', tools, stopWhen: stepCountIs(5), maxRetries: 0, ...extra });
}

export const aiSdkPeer: Peer = {
  name: 'AI SDK',
  version: installedVersion('ai'),
  async trivial() {
    const result = await agentLoop(trivialModel, trivialTools);
    if (result.text !== 'done') throw new Error(`ai sdk: trivial run answered ${result.text}`);
  },
  async fanout(calls, iterations) {
    const model = scriptedModel(Array.from({ length: calls }, () => ({ name: 'burn', args: { n: iterations } })));
    const result = await agentLoop(model, burnTools);
    if (result.text !== 'done') throw new Error('ai sdk: the fan-out did not finish');
  },
  async cancellable(iterations, signal, onStop) {
    const tools = {
      spin: tool({
        description: 'burn CPU, checking the signal',
        inputSchema: z.object({}),
        execute: async (_args, { abortSignal }) => {
          onStop(burnChecking(iterations, () => abortSignal?.aborted === true));
          return 'stopped';
        },
      }),
    };
    await agentLoop(scriptedModel([{ name: 'spin', args: {} }]), tools, { abortSignal: signal });
  },
  async neverYields(iterations, deadlineMs) {
    const tools = {
      spin: tool({ description: 'never yields', inputSchema: z.object({}), execute: async () => burn(iterations) }),
    };
    await agentLoop(scriptedModel([{ name: 'spin', args: {} }]), tools, { timeout: deadlineMs });
  },
  async question() {
    // A tool without `execute`: the loop stops at its call and hands it to the caller.
    const tools = { ask: tool({ description: 'ask a person', inputSchema: z.object({}) }) };
    // (exactOptionalPropertyTypes rejects an execute-less tool as a ToolSet member; the SDK accepts it.)
    const result = await agentLoop(scriptedModel([{ name: 'ask', args: {} }]), tools as unknown as ToolSet);
    if (result.toolCalls.length !== 1) throw new Error('ai sdk: the call was not handed back');
    return `generateText() returned (finishReason ${result.finishReason}) with ${result.toolCalls.length} unexecuted tool call; the messages (${result.response.messages.length}) are the caller's to keep and send back with the answer`;
  },
};
