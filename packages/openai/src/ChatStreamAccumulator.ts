import { type AssistantMessage, createId, type ModelDelta, type ModelToolCall, type Usage } from '@troupe/core';

/**
 * An answer assembled from chat-completions chunks.
 *
 * @example
 * ```ts
 * const { answer } = normaliseChunks([{ choices: [{ index: 0, delta: { content: 'Hi' }, finish_reason: 'stop' }] }])
 * const normalised: NormalisedAnswer = answer
 * normalised.message.content // 'Hi'
 * normalised.finishReason    // 'stop'
 * ```
 */
export interface NormalisedAnswer {
  readonly message: AssistantMessage;
  readonly usage: Usage | undefined;
  /** Reasoning text (`reasoning_content` or `reasoning`), when the server sent any. */
  readonly reasoning: string | undefined;
  /** The model the server says answered. */
  readonly model: string | undefined;
  /** The last `finish_reason` seen (`stop`, `tool_calls`, `length`, ...); `undefined` if none came. */
  readonly finishReason: string | undefined;
}

/**
 * Options of {@link ChatStreamAccumulator}.
 *
 * @example
 * ```ts
 * const options: ChatStreamAccumulatorOptions = { onDelta: (d) => d.type === 'text' && process.stdout.write(d.text), idFor: (i) => `call_${i}` }
 * const acc = new ChatStreamAccumulator(options)
 * ```
 */
export interface ChatStreamAccumulatorOptions {
  /** Called with every delta, in order, as chunks are pushed. */
  readonly onDelta?: ((delta: ModelDelta) => void) | undefined;
  /** The id of a tool call the server sent without one (`position` counts calls from 0); default: a fresh unique id. */
  readonly idFor?: ((position: number) => string) | undefined;
}

interface CallSlot {
  /** The server's `index`, when it sent one. */
  readonly serverIndex: number | undefined;
  id: string | undefined;
  /** `id` was made here (the server sent none yet): a real one arriving later replaces it. */
  madeId: boolean;
  name: string;
  arguments: string;
  /** `arguments` arrived as a JSON object (llama.cpp): it is complete, not a fragment. */
  whole: boolean;
}

type Rec = Record<string, unknown>;

const isRec = (v: unknown): v is Rec => typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const count = (v: unknown): number | undefined =>
  typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : undefined;

const defaultIdFor = (): string => createId('call');

/**
 * Assembles an assistant answer from the chunks of a chat-completions stream
 * as real servers send them, and reports each piece as a {@link ModelDelta}.
 * Pure: no I/O, no timers; push chunk objects (parsed SSE `data:`), then call
 * `finish()`. What it smooths over:
 *
 * - tool-call deltas without `index` (grouped by `id`, else continuing the
 *   last call) or without `id` (one is made with `idFor`; a real id that
 *   arrives later replaces it, and its delta carries the new id);
 * - a call's `name` arriving after its first delta, or repeated in each delta;
 * - `arguments` sent as a JSON object instead of text (taken whole);
 * - `""` (or nothing) as the arguments of a tool without parameters (`{}`);
 * - arguments that are not valid JSON: kept as the raw text, which the agent
 *   loop turns into an error result the model sees — never a crash;
 * - usage in a trailing chunk with no choices, or repeated in every chunk
 *   (the last one wins); cached and reasoning token counts when present;
 * - reasoning text as `reasoning_content` or `reasoning`;
 * - odd shapes (`choices: null`, missing `delta`): skipped, not thrown.
 *
 * Only choice 0 is read. Tool-call deltas carry the call's position in the
 * answer as `index` (0, 1, ...), whatever index the server used.
 *
 * @example
 * ```ts
 * const chunks: unknown[] = [
 *   { choices: [{ index: 0, delta: { content: 'Hel' } }] },
 *   { choices: [{ index: 0, delta: { content: 'lo' }, finish_reason: 'stop' }] },
 * ]
 * const acc = new ChatStreamAccumulator({ onDelta: (d) => console.log(d) })
 * for (const chunk of chunks) acc.push(chunk)
 * const { message, usage } = acc.finish()
 * ```
 */
export class ChatStreamAccumulator {
  readonly #onDelta: ((delta: ModelDelta) => void) | undefined;
  readonly #idFor: (position: number) => string;
  #text = '';
  #reasoning = '';
  #calls: CallSlot[] = [];
  #usage: Usage | undefined;
  #model: string | undefined;
  #finishReason: string | undefined;
  #deltas = 0;

  constructor(options: ChatStreamAccumulatorOptions = {}) {
    this.#onDelta = options.onDelta;
    this.#idFor = options.idFor ?? defaultIdFor;
  }

  /** How many deltas the pushed chunks produced so far (0: nothing the caller could have seen). */
  get deltaCount(): number {
    return this.#deltas;
  }

  /** Fold one chunk in; returns the number of deltas it produced. */
  push(chunk: unknown): number {
    if (!isRec(chunk)) return 0;
    const before = this.#deltas;
    if (this.#model === undefined) {
      const model = str(chunk.model);
      if (model !== undefined && model !== '') this.#model = model;
    }
    const usage = readUsage(chunk.usage);
    if (usage !== undefined) this.#usage = usage;
    const choices = chunk.choices;
    const choice = Array.isArray(choices)
      ? (choices.find((c) => isRec(c) && (c.index === 0 || c.index === undefined)) ?? choices[0])
      : undefined;
    if (!isRec(choice)) return 0;
    // A non-streamed completion carries `message` where a chunk carries `delta`.
    const delta = isRec(choice.delta) ? choice.delta : isRec(choice.message) ? choice.message : undefined;
    if (delta !== undefined) {
      const reasoning = str(delta.reasoning_content) ?? str(delta.reasoning);
      if (reasoning !== undefined && reasoning !== '') {
        this.#reasoning += reasoning;
        this.#emit({ type: 'reasoning', text: reasoning });
      }
      const content = str(delta.content);
      if (content !== undefined && content !== '') {
        this.#text += content;
        this.#emit({ type: 'text', text: content });
      }
      if (Array.isArray(delta.tool_calls)) for (const call of delta.tool_calls) this.#pushCall(call);
    }
    const finish = str(choice.finish_reason);
    if (finish !== undefined && finish !== '') this.#finishReason = finish;
    return this.#deltas - before;
  }

  /** The answer so far (call it once the stream ended). */
  finish(): NormalisedAnswer {
    const toolCalls: ModelToolCall[] = this.#calls
      .filter((c) => c.name !== '' || c.arguments !== '')
      .map((c, position) => ({
        id: c.id ?? this.#idFor(position),
        name: c.name,
        arguments: parseArguments(c.arguments),
      }));
    const message: AssistantMessage =
      toolCalls.length === 0
        ? { role: 'assistant', content: this.#text }
        : { role: 'assistant', content: this.#text, toolCalls };
    return {
      message,
      usage: this.#usage,
      reasoning: this.#reasoning === '' ? undefined : this.#reasoning,
      model: this.#model,
      finishReason: this.#finishReason,
    };
  }

  #emit(delta: ModelDelta): void {
    this.#deltas++;
    this.#onDelta?.(delta);
  }

  #pushCall(raw: unknown): void {
    if (!isRec(raw)) return;
    const fn = isRec(raw.function) ? raw.function : raw;
    const serverIndex = count(raw.index);
    const id = str(raw.id) || undefined;
    const name = str(fn.name) ?? '';
    const args = fn.arguments;
    let position = this.#slotFor(serverIndex, id, name);
    let slot = this.#calls[position];
    const isNew = slot === undefined;
    if (slot === undefined) {
      slot = { serverIndex, id: undefined, madeId: false, name: '', arguments: '', whole: false };
      position = this.#calls.push(slot) - 1;
    }
    const out: { type: 'tool_call'; index: number; id?: string; name?: string; arguments?: string } = {
      type: 'tool_call',
      index: position,
    };
    if (id !== undefined && id !== slot.id && (slot.id === undefined || slot.madeId)) {
      slot.id = id;
      slot.madeId = false;
      out.id = id;
    } else if (slot.id === undefined) {
      slot.id = this.#idFor(position);
      slot.madeId = true;
      out.id = slot.id;
    }
    // A name repeated in every delta is one name; a different one continues it.
    if (name !== '' && name !== slot.name) {
      slot.name = slot.name === '' ? name : slot.name + name;
      out.name = slot.name;
    }
    let fragment: string | undefined;
    if (typeof args === 'string') {
      if (args !== '' && !slot.whole) {
        slot.arguments += args;
        fragment = args;
      }
    } else if (args !== undefined && args !== null) {
      // llama.cpp (and some proxies) send the whole arguments as an object.
      fragment = JSON.stringify(args);
      slot.arguments = fragment;
      slot.whole = true;
    }
    if (fragment !== undefined) out.arguments = fragment;
    if (isNew || out.id !== undefined || out.name !== undefined || fragment !== undefined) this.#emit(out);
  }

  /** Which call a delta belongs to: its position, or `calls.length` for a new one. */
  #slotFor(serverIndex: number | undefined, id: string | undefined, name: string): number {
    const calls = this.#calls;
    if (id !== undefined) {
      const byId = calls.findIndex((c) => c.id === id);
      if (byId >= 0) return byId;
    }
    if (serverIndex !== undefined) {
      const byIndex = calls.findIndex((c) => c.serverIndex === serverIndex);
      // Some servers number every call 0: a new id under a used index is a new call.
      const known = calls[byIndex];
      if (known !== undefined && (id === undefined || known.id === undefined || known.madeId)) return byIndex;
      return calls.length;
    }
    if (id !== undefined) return calls.length;
    // Neither index nor id: a fragment of the last call, unless it names a new one.
    const last = calls[calls.length - 1];
    if (last === undefined) return 0;
    if (name !== '' && last.name !== '' && name !== last.name) return calls.length;
    if (name !== '' && name === last.name && last.arguments !== '') return calls.length;
    return calls.length - 1;
  }
}

/** `""` or nothing: no arguments. Valid JSON: parsed. Anything else: the raw text, for the loop to refuse. */
function parseArguments(text: string): unknown {
  if (text.trim() === '') return {};
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function readUsage(raw: unknown): Usage | undefined {
  if (!isRec(raw)) return undefined;
  const input = count(raw.prompt_tokens) ?? count(raw.input_tokens);
  const output = count(raw.completion_tokens) ?? count(raw.output_tokens);
  if (input === undefined && output === undefined) return undefined;
  const inDetails = isRec(raw.prompt_tokens_details)
    ? raw.prompt_tokens_details
    : isRec(raw.input_tokens_details)
      ? raw.input_tokens_details
      : undefined;
  const outDetails = isRec(raw.completion_tokens_details)
    ? raw.completion_tokens_details
    : isRec(raw.output_tokens_details)
      ? raw.output_tokens_details
      : undefined;
  const cached = count(inDetails?.cached_tokens);
  const reasoning = count(outDetails?.reasoning_tokens);
  return {
    inputTokens: input ?? 0,
    outputTokens: output ?? 0,
    ...(cached === undefined ? {} : { cachedInputTokens: cached }),
    ...(reasoning === undefined ? {} : { reasoningTokens: reasoning }),
  };
}

/**
 * Normalise a whole recorded stream (or one non-streamed completion, which
 * is read like a single chunk): the deltas in order and the answer.
 *
 * @example
 * ```ts
 * const chunks: unknown[] = [
 *   { choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { name: 'get_weather', arguments: '{"city":' } }] } }] },
 *   { choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '"Oslo"}' } }] }, finish_reason: 'tool_calls' }] },
 * ]
 * const { deltas, answer } = normaliseChunks(chunks, { idFor: (i) => `call_${i}` })
 * answer.message.toolCalls // [{ id: 'call_0', name: 'get_weather', arguments: { city: 'Oslo' } }]
 * ```
 */
export function normaliseChunks(
  chunks: Iterable<unknown>,
  options: Omit<ChatStreamAccumulatorOptions, 'onDelta'> = {},
): { readonly deltas: readonly ModelDelta[]; readonly answer: NormalisedAnswer } {
  const deltas: ModelDelta[] = [];
  const acc = new ChatStreamAccumulator({ ...options, onDelta: (d) => deltas.push(d) });
  for (const chunk of chunks) acc.push(chunk);
  return { deltas, answer: acc.finish() };
}
