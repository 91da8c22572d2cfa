import type { AssistantMessage, Message, Model, ModelRequest, ModelResponse, ToolMessage } from '../Model.js';
import type { OutputSpec } from '../OutputSpec.js';
import type { ToolSpec } from '../Tool.js';
import { TroupeError } from '../TroupeError.js';
import type { Usage } from '../Usage.js';

/**
 * What a scripted turn sees.
 *
 * @example
 * ```ts
 * const model = new ScriptedModel([
 *   ({ turn, lastToolResults }: ScriptInput) => (turn === 0 ? 'first' : `after ${lastToolResults.length} results`),
 * ])
 * ```
 */
export interface ScriptInput {
  readonly messages: readonly Message[];
  readonly tools: readonly ToolSpec[];
  /** 0-based index of this turn over the whole transcript. */
  readonly turn: number;
  /** Tool results since the model last spoke (the answers to its previous calls). */
  readonly lastToolResults: readonly ToolMessage[];
  /** Every tool result so far. */
  readonly toolResults: readonly ToolMessage[];
  readonly signal: AbortSignal;
  /** The structured output the agent asks for (`ModelRequest.output`), if any. */
  readonly output: OutputSpec | undefined;
}

/**
 * A scripted answer: plain text, or text and tool calls (ids default to
 * `call_<turn>_<i>`), or a structured `output`, answered as its JSON text
 * (for an agent with an `output` schema; the loop checks it like a real
 * model's answer).
 *
 * @example
 * ```ts
 * const replies: ScriptedReply[] = [
 *   'plain text',
 *   { text: 'looking it up', toolCalls: [{ name: 'search', arguments: { query: 'oslo' } }], usage: { inputTokens: 10, outputTokens: 4 } },
 *   { output: { city: 'Oslo', tempC: 4 } },
 * ]
 * ```
 */
export type ScriptedReply =
  | string
  | {
      readonly text?: string;
      /** A structured answer: the reply's text is its JSON (`text` is then ignored). */
      readonly output?: unknown;
      readonly toolCalls?: readonly { readonly id?: string; readonly name: string; readonly arguments?: unknown }[];
      readonly usage?: Usage;
    };

/**
 * One turn of a script: a fixed reply, or a function of what happened so far.
 *
 * A step that throws fails the turn like a real model's error.
 *
 * @example
 * ```ts
 * const steps: ScriptStep[] = [
 *   { toolCalls: [{ name: 'get_weather', arguments: { city: 'Oslo' } }] },
 *   async ({ lastToolResults }) => `It is ${JSON.stringify(lastToolResults[0]?.content)}`,
 * ]
 * const model = new ScriptedModel(steps)
 * ```
 */
export type ScriptStep = ScriptedReply | ((input: ScriptInput) => ScriptedReply | Promise<ScriptedReply>);

/**
 * Options of {@link ScriptedModel}.
 *
 * @example
 * ```ts
 * const options: ScriptedModelOptions = { whenExhausted: 'repeat-last' }
 * const model = new ScriptedModel(['always this'], options)
 * ```
 */
export interface ScriptedModelOptions {
  /** What happens past the last step: repeat it, or fail the turn (default). */
  readonly whenExhausted?: 'repeat-last' | 'error';
}

/**
 * A deterministic model for tests and benchmarks. Its turn index comes from
 * the transcript (the number of assistant messages so far), never from
 * instance state, so one instance serves any number of concurrent runs.
 *
 * @example
 * ```ts
 * const model = new ScriptedModel([
 *   { toolCalls: [{ name: 'add', arguments: { a: 1, b: 2 } }] },
 *   ({ lastToolResults }) => `the sum is ${lastToolResults[0]?.content}`,
 * ])
 * ```
 */
export class ScriptedModel implements Model {
  readonly name = 'scripted';
  readonly #steps: readonly ScriptStep[];
  readonly #whenExhausted: 'repeat-last' | 'error';

  constructor(steps: readonly ScriptStep[], options: ScriptedModelOptions = {}) {
    if (steps.length === 0)
      throw new TroupeError('a ScriptedModel needs at least one step', { code: 'ERR_INVALID_ARGUMENT' });
    this.#steps = [...steps];
    this.#whenExhausted = options.whenExhausted ?? 'error';
  }

  /** A model that always answers `text` without tool calls. */
  static answering(text: string): ScriptedModel {
    return new ScriptedModel([text], { whenExhausted: 'repeat-last' });
  }

  async generate(request: ModelRequest): Promise<ModelResponse> {
    let turn = 0;
    let lastAssistant = -1;
    const toolResults: ToolMessage[] = [];
    const messages = request.messages;
    for (let i = 0; i < messages.length; i++) {
      const m = messages[i] as Message;
      if (m.role === 'assistant') {
        turn++;
        lastAssistant = i;
      } else if (m.role === 'tool') toolResults.push(m);
    }
    let step = this.#steps[turn];
    if (step === undefined) {
      if (this.#whenExhausted === 'error') {
        throw new TroupeError(`the scripted model has ${this.#steps.length} steps and was asked for turn ${turn + 1}`, {
          code: 'ERR_MODEL',
        });
      }
      step = this.#steps[this.#steps.length - 1] as ScriptStep;
    }
    const lastToolResults: ToolMessage[] = [];
    for (let i = lastAssistant + 1; i < messages.length; i++) {
      const m = messages[i] as Message;
      if (m.role === 'tool') lastToolResults.push(m);
    }
    const reply =
      typeof step === 'function'
        ? await step({
            messages,
            tools: request.tools,
            turn,
            lastToolResults,
            toolResults,
            // Read lazily: a signal costs a waitAsync bridge, and most steps never look at it.
            get signal() {
              return request.signal;
            },
            output: request.output,
          })
        : step;
    return toResponse(reply, turn);
  }
}

function toResponse(reply: ScriptedReply, turn: number): ModelResponse {
  if (typeof reply === 'string') return { message: { role: 'assistant', content: reply } };
  const content = reply.output !== undefined ? JSON.stringify(reply.output) : (reply.text ?? '');
  const message: AssistantMessage =
    reply.toolCalls === undefined || reply.toolCalls.length === 0
      ? { role: 'assistant', content }
      : {
          role: 'assistant',
          content,
          toolCalls: reply.toolCalls.map((c, i) => ({
            id: c.id ?? `call_${turn}_${i}`,
            name: c.name,
            arguments: c.arguments ?? {},
          })),
        };
  return reply.usage === undefined ? { message } : { message, usage: reply.usage };
}
