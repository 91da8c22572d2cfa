// OpenAI Agents JS driven through `run(agent)` with a hand-written `Model` (no network, tracing off).
import {
  Agent,
  type AgentOutputItem,
  type Model,
  type ModelRequest,
  type ModelResponse,
  RunState,
  run,
  setTracingDisabled,
  tool,
  Usage,
} from '@openai/agents';
import { z } from 'zod';
import { burn, burnChecking } from './burn.js';
import type { Peer, ToolStop } from './Peer.js';
import { installedVersion } from './version.js';

setTracingDisabled(true);

interface Call {
  readonly name: string;
  readonly args: unknown;
}

/** Asks `calls` on its first turn; once a tool result is in its input, answers `done`. */
class ScriptedAgentsModel implements Model {
  readonly #calls: readonly Call[];
  constructor(calls: readonly Call[]) {
    this.#calls = calls;
  }
  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    const input = Array.isArray(request.input) ? request.input : [];
    const answered = input.some((item) => item.type === 'function_call_result');
    const output: AgentOutputItem[] = answered
      ? [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'done' }] }]
      : this.#calls.map((c, i) => ({
          type: 'function_call',
          callId: `call_${i}`,
          name: c.name,
          arguments: JSON.stringify(c.args),
          status: 'completed',
        }));
    return { usage: new Usage(), output };
  }
  // biome-ignore lint/correctness/useYield: the bench never streams; a streamed call is a bench bug
  async *getStreamedResponse(): AsyncIterable<never> {
    throw new Error('peers bench: the scripted model does not stream');
  }
}

const n = z.object({ n: z.number() });
const echo = tool({ name: 'echo', description: 'echo', parameters: n, execute: async ({ n }) => `ok ${n}` });
const burner = tool({ name: 'burn', description: 'burn CPU', parameters: n, execute: async ({ n }) => burn(n) });

const trivialAgent = new Agent({
  name: 'trivial',
  instructions: 'Call echo, then answer.',
  model: new ScriptedAgentsModel([{ name: 'echo', args: { n: 1 } }]),
  tools: [echo],
});

export const openaiAgentsPeer: Peer = {
  name: 'OpenAI Agents JS',
  version: installedVersion('@openai/agents'),
  async trivial() {
    const result = await run(trivialAgent, 'go');
    if (result.finalOutput !== 'done') throw new Error(`openai agents: trivial run answered ${result.finalOutput}`);
  },
  async fanout(calls, iterations) {
    const agent = new Agent({
      name: 'fanout',
      instructions: 'Burn.',
      model: new ScriptedAgentsModel(Array.from({ length: calls }, () => ({ name: 'burn', args: { n: iterations } }))),
      tools: [burner],
    });
    const result = await run(agent, 'go');
    if (result.finalOutput !== 'done') throw new Error('openai agents: the fan-out did not finish');
  },
  async cancellable(iterations, signal, onStop) {
    const checking = tool({
      name: 'spin',
      description: 'burn CPU, checking the signal',
      parameters: z.object({}),
      execute: async (_args, _ctx, details) => {
        const stop: ToolStop = burnChecking(iterations, () => details?.signal?.aborted === true);
        onStop(stop);
        return 'stopped';
      },
    });
    const agent = new Agent({
      name: 'cancellable',
      instructions: 'Spin.',
      model: new ScriptedAgentsModel([{ name: 'spin', args: {} }]),
      tools: [checking],
    });
    await run(agent, 'go', { signal });
  },
  async neverYields(iterations, deadlineMs) {
    const spinner = tool({
      name: 'spin',
      description: 'never yields',
      parameters: z.object({}),
      timeoutMs: deadlineMs,
      execute: async () => burn(iterations),
    });
    const agent = new Agent({
      name: 'never',
      instructions: 'Spin.',
      model: new ScriptedAgentsModel([{ name: 'spin', args: {} }]),
      tools: [spinner],
    });
    await run(agent, 'go', { signal: AbortSignal.timeout(deadlineMs) });
  },
  async question() {
    const guarded = tool({
      name: 'guarded',
      description: 'needs a person',
      parameters: z.object({}),
      needsApproval: true,
      execute: async () => 'ran',
    });
    const agent = new Agent({
      name: 'asker',
      instructions: 'Ask.',
      model: new ScriptedAgentsModel([{ name: 'guarded', args: {} }]),
      tools: [guarded],
    });
    const first = await run(agent, 'go');
    const interruption = first.interruptions[0];
    if (interruption === undefined) throw new Error('openai agents: no interruption');
    const saved = first.state.toString();
    const restored = await RunState.fromString(agent, saved);
    restored.approve(interruption);
    const second = await run(agent, restored);
    if (second.finalOutput !== 'done') throw new Error('openai agents: the approved run did not finish');
    return `run() returned with ${first.interruptions.length} interruption (needsApproval); the RunState is the caller's to keep (serialized: ${saved.length} bytes), resumed with run(agent, state) after approve()`;
  },
};
