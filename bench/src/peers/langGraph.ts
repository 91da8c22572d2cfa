// LangGraph.js driven through `createReactAgent` (its prebuilt agent loop: a model node and a
// ToolNode) with a hand-written chat model (no network).
import { BaseChatModel } from '@langchain/core/language_models/chat_models';
import { AIMessage, type BaseMessage } from '@langchain/core/messages';
import type { ChatResult } from '@langchain/core/outputs';
import { type StructuredToolInterface, tool } from '@langchain/core/tools';
import { Command, interrupt, MemorySaver } from '@langchain/langgraph';
import { createReactAgent } from '@langchain/langgraph/prebuilt';
import { z } from 'zod';
import { burn, burnChecking } from './burn.js';
import type { Peer } from './Peer.js';
import { installedVersion } from './version.js';

interface Call {
  readonly name: string;
  readonly args: Record<string, unknown>;
}

/** Asks `calls` on its first turn; once a tool message is in its input, answers `done`. */
class ScriptedChatModel extends BaseChatModel {
  readonly #calls: readonly Call[];
  constructor(calls: readonly Call[]) {
    super({});
    this.#calls = calls;
  }
  _llmType(): string {
    return 'scripted';
  }
  override bindTools(): this {
    return this;
  }
  async _generate(messages: BaseMessage[]): Promise<ChatResult> {
    const answered = messages.some((m) => m.getType() === 'tool');
    const message = answered
      ? new AIMessage('done')
      : new AIMessage({
          content: '',
          tool_calls: this.#calls.map((c, i) => ({
            id: `call_${i}`,
            name: c.name,
            args: c.args,
            type: 'tool_call' as const,
          })),
        });
    return { generations: [{ text: answered ? 'done' : '', message }] };
  }
}

function agentOf(calls: readonly Call[], tools: StructuredToolInterface[], checkpointer?: MemorySaver) {
  return createReactAgent({
    llm: new ScriptedChatModel(calls),
    tools,
    ...(checkpointer === undefined ? {} : { checkpointer }),
  });
}

const n = z.object({ n: z.number() });
const trivialAgent = agentOf(
  [{ name: 'echo', args: { n: 1 } }],
  [tool(async ({ n }) => `ok ${n}`, { name: 'echo', description: 'echo', schema: n })],
);
const burner = tool(async ({ n }) => String(burn(n)), { name: 'burn', description: 'burn CPU', schema: n });
const input = () => ({ messages: [{ role: 'user', content: 'go' }] });

function lastText(result: { messages: BaseMessage[] }): unknown {
  return result.messages.at(-1)?.content;
}

export const langGraphPeer: Peer = {
  name: 'LangGraph.js',
  version: installedVersion('@langchain/langgraph'),
  async trivial() {
    const result = await trivialAgent.invoke(input());
    if (lastText(result) !== 'done') throw new Error('langgraph: trivial run did not answer done');
  },
  async fanout(calls, iterations) {
    const agent = agentOf(
      Array.from({ length: calls }, () => ({ name: 'burn', args: { n: iterations } })),
      [burner],
    );
    const result = await agent.invoke(input());
    if (lastText(result) !== 'done') throw new Error('langgraph: the fan-out did not finish');
  },
  async cancellable(iterations, signal, onStop) {
    const spin = tool(
      async (_args, config) => {
        onStop(burnChecking(iterations, () => config?.signal?.aborted === true));
        return 'stopped';
      },
      { name: 'spin', description: 'burn CPU, checking the signal', schema: z.object({}) },
    );
    await agentOf([{ name: 'spin', args: {} }], [spin]).invoke(input(), { signal });
  },
  async neverYields(iterations, deadlineMs) {
    const spin = tool(async () => String(burn(iterations)), {
      name: 'spin',
      description: 'never yields',
      schema: z.object({}),
    });
    await agentOf([{ name: 'spin', args: {} }], [spin]).invoke(input(), { signal: AbortSignal.timeout(deadlineMs) });
  },
  async question() {
    const ask = tool(async () => String(interrupt('ok?')), {
      name: 'ask',
      description: 'ask a person',
      schema: z.object({}),
    });
    const checkpointer = new MemorySaver();
    const agent = agentOf([{ name: 'ask', args: {} }], [ask], checkpointer);
    const config = { configurable: { thread_id: 't1' } };
    const first = (await agent.invoke(input(), config)) as { __interrupt__?: unknown[] };
    const waiting = await agent.getState(config);
    const resumed = await agent.invoke(new Command({ resume: 'yes' }), config);
    if (lastText(resumed) !== 'done') throw new Error('langgraph: the resumed run did not finish');
    return `invoke() returned with ${first.__interrupt__?.length ?? 0} interrupt (interrupt() in the tool); the graph state is in the checkpointer (next: ${waiting.next.join(',')}), resumed with invoke(new Command({ resume }))`;
  },
};
