import type {
  LanguageModelV4Content,
  LanguageModelV4FinishReason,
  LanguageModelV4StreamPart,
  LanguageModelV4Usage,
  SharedV4ProviderMetadata,
} from '@ai-sdk/provider';
import type { AssistantMessage, ModelDelta, ModelToolCall, Usage } from '@troupe/core';
import { type KeptReasoning, writeProviderData } from './providerData.js';

/** An answer assembled from a provider's stream parts (or its whole content). */
export interface AssembledAnswer {
  readonly message: AssistantMessage;
  readonly usage: Usage | undefined;
  /** The reasoning text, when the model sent any. */
  readonly reasoning: string | undefined;
  /** The model the provider says answered. */
  readonly model: string | undefined;
  /** Why it stopped, spelled as Troupe's other models spell it (`stop`, `tool_calls`, `length`, ...). */
  readonly finishReason: string | undefined;
}

interface CallSlot {
  readonly index: number;
  readonly id: string;
  readonly name: string;
  /** The input deltas so far (used when no final `tool-call` part came). */
  input: string;
  /** The final input (JSON text), from the `tool-call` part. */
  final: string | undefined;
  providerOptions: SharedV4ProviderMetadata | undefined;
}

interface ReasoningSlot {
  text: string;
  providerOptions: SharedV4ProviderMetadata | undefined;
}

/** Provider metadata merged per provider (later keys win): a signature arrives after the text it signs. */
function merge(
  into: SharedV4ProviderMetadata | undefined,
  more: SharedV4ProviderMetadata | undefined,
): SharedV4ProviderMetadata | undefined {
  if (more === undefined) return into;
  if (into === undefined) return { ...more };
  for (const [provider, fields] of Object.entries(more)) into[provider] = { ...into[provider], ...fields };
  return into;
}

const FINISH: Readonly<Record<string, string>> = { 'tool-calls': 'tool_calls', 'content-filter': 'content_filter' };

/** The unified finish reason in the spelling Troupe's telemetry uses everywhere. */
export function finishReasonOf(reason: LanguageModelV4FinishReason | undefined): string | undefined {
  if (reason === undefined) return undefined;
  return FINISH[reason.unified] ?? reason.unified;
}

const count = (n: number | undefined): number | undefined =>
  typeof n === 'number' && Number.isFinite(n) && n >= 0 ? n : undefined;

/**
 * The provider's usage as Troupe's: input tokens include those read from a
 * cache (`cachedInputTokens` says how many) and those written to it; output
 * tokens include reasoning (`reasoningTokens`). `undefined` when the
 * provider reported no counts.
 */
export function toUsage(usage: LanguageModelV4Usage | undefined): Usage | undefined {
  if (usage === undefined) return undefined;
  const input = usage.inputTokens;
  const output = usage.outputTokens;
  const parts = [input?.noCache, input?.cacheRead, input?.cacheWrite].map(count);
  const inputTokens =
    count(input?.total) ?? (parts.every((p) => p === undefined) ? undefined : parts.reduce((a = 0, b = 0) => a + b, 0));
  const outputTokens =
    count(output?.total) ??
    (output?.text === undefined && output?.reasoning === undefined
      ? undefined
      : (count(output.text) ?? 0) + (count(output.reasoning) ?? 0));
  if (inputTokens === undefined && outputTokens === undefined) return undefined;
  const out: { inputTokens: number; outputTokens: number; cachedInputTokens?: number; reasoningTokens?: number } = {
    inputTokens: inputTokens ?? 0,
    outputTokens: outputTokens ?? 0,
  };
  const cached = count(input?.cacheRead);
  if (cached !== undefined) out.cachedInputTokens = cached;
  const reasoning = count(output?.reasoning);
  if (reasoning !== undefined) out.reasoningTokens = reasoning;
  return out;
}

/**
 * Assembles an answer from the parts of a provider's stream, as the language
 * model specification defines them, and reports each piece as a
 * {@link ModelDelta} in order: text, reasoning, and tool-call fragments (a
 * call's `index` is its position in the answer, its `id` and `name` come with
 * its first fragment). What it keeps for the next turn goes on the calls'
 * `providerData`. Tool calls the provider ran itself are not the agent's to
 * run and are left out. Pure: no I/O, no timers.
 */
export class PartAccumulator {
  readonly #onDelta: ((delta: ModelDelta) => void) | undefined;
  #text = '';
  #reasoning = '';
  readonly #reasonings = new Map<string, ReasoningSlot>();
  readonly #calls = new Map<string, CallSlot>();
  #usage: Usage | undefined;
  #model: string | undefined;
  #finish: LanguageModelV4FinishReason | undefined;
  #finished = false;
  #error: { readonly error: unknown } | undefined;
  #deltas = 0;

  constructor(onDelta: ((delta: ModelDelta) => void) | undefined) {
    this.#onDelta = onDelta;
  }

  /** How many deltas the parts produced so far (0: nothing the caller could have seen). */
  get deltaCount(): number {
    return this.#deltas;
  }

  /** A `finish` part came. */
  get finished(): boolean {
    return this.#finished;
  }

  /** The first `error` part, if one came: the stream failed. */
  get error(): { readonly error: unknown } | undefined {
    return this.#error;
  }

  #emit(delta: ModelDelta): void {
    this.#deltas++;
    this.#onDelta?.(delta);
  }

  #reasoningSlot(id: string): ReasoningSlot {
    let slot = this.#reasonings.get(id);
    if (slot === undefined) {
      slot = { text: '', providerOptions: undefined };
      this.#reasonings.set(id, slot);
    }
    return slot;
  }

  #call(id: string, name: string, providerExecuted: boolean | undefined): CallSlot | undefined {
    if (providerExecuted === true) return undefined;
    let slot = this.#calls.get(id);
    if (slot === undefined) {
      slot = { index: this.#calls.size, id, name, input: '', final: undefined, providerOptions: undefined };
      this.#calls.set(id, slot);
      this.#emit({ type: 'tool_call', index: slot.index, id, name });
    }
    return slot;
  }

  /** Fold one stream part in; returns the number of deltas it produced. */
  push(part: LanguageModelV4StreamPart): number {
    const before = this.#deltas;
    switch (part.type) {
      case 'text-delta':
        if (part.delta !== '') {
          this.#text += part.delta;
          this.#emit({ type: 'text', text: part.delta });
        }
        break;
      case 'reasoning-start':
      case 'reasoning-end':
        this.#reasoningSlot(part.id).providerOptions = merge(
          this.#reasoningSlot(part.id).providerOptions,
          part.providerMetadata,
        );
        break;
      case 'reasoning-delta': {
        const slot = this.#reasoningSlot(part.id);
        slot.providerOptions = merge(slot.providerOptions, part.providerMetadata);
        if (part.delta !== '') {
          slot.text += part.delta;
          this.#reasoning += part.delta;
          this.#emit({ type: 'reasoning', text: part.delta });
        }
        break;
      }
      case 'tool-input-start': {
        const slot = this.#call(part.id, part.toolName, part.providerExecuted);
        if (slot !== undefined) slot.providerOptions = merge(slot.providerOptions, part.providerMetadata);
        break;
      }
      case 'tool-input-delta': {
        const slot = this.#calls.get(part.id);
        if (slot !== undefined && part.delta !== '') {
          slot.input += part.delta;
          this.#emit({ type: 'tool_call', index: slot.index, arguments: part.delta });
        }
        break;
      }
      case 'tool-call': {
        const seen = this.#calls.has(part.toolCallId);
        const slot = this.#call(part.toolCallId, part.toolName, part.providerExecuted);
        if (slot === undefined) break;
        slot.final = part.input;
        slot.providerOptions = merge(slot.providerOptions, part.providerMetadata);
        // A provider that streams no input fragments: the whole input is the call's one fragment.
        if (!seen && part.input !== '') this.#emit({ type: 'tool_call', index: slot.index, arguments: part.input });
        break;
      }
      case 'response-metadata':
        if (part.modelId !== undefined && part.modelId !== '') this.#model ??= part.modelId;
        break;
      case 'finish':
        this.#finished = true;
        this.#finish = part.finishReason;
        this.#usage = toUsage(part.usage);
        break;
      case 'error':
        this.#error ??= { error: part.error };
        break;
      default:
        // Sources, files, provider-run tool results, custom parts, warnings: not part of the agent's answer.
        break;
    }
    return this.#deltas - before;
  }

  /** Fold a whole answer in (`doGenerate`): no deltas are reported. */
  pushContent(
    content: readonly LanguageModelV4Content[],
    finishReason: LanguageModelV4FinishReason,
    usage: LanguageModelV4Usage,
    modelId: string | undefined,
  ): void {
    let reasoning = 0;
    for (const part of content) {
      switch (part.type) {
        case 'text':
          this.#text += part.text;
          break;
        case 'reasoning': {
          const slot = this.#reasoningSlot(String(reasoning++));
          slot.text += part.text;
          slot.providerOptions = merge(slot.providerOptions, part.providerMetadata);
          this.#reasoning += part.text;
          break;
        }
        case 'tool-call': {
          if (part.providerExecuted === true) break;
          const slot: CallSlot = {
            index: this.#calls.size,
            id: part.toolCallId,
            name: part.toolName,
            input: '',
            final: part.input,
            providerOptions: merge(undefined, part.providerMetadata),
          };
          this.#calls.set(part.toolCallId, slot);
          break;
        }
        default:
          break;
      }
    }
    this.#model = modelId;
    this.#finished = true;
    this.#finish = finishReason;
    this.#usage = toUsage(usage);
  }

  /** The answer so far. */
  finish(): AssembledAnswer {
    const calls = [...this.#calls.values()];
    // Only reasoning a provider attached something to (a signature, an item id) is asked for again.
    const kept: KeptReasoning[] = [...this.#reasonings.values()]
      .filter((r) => r.providerOptions !== undefined && Object.keys(r.providerOptions).length > 0)
      .map((r) => ({ text: r.text, providerOptions: r.providerOptions }));
    const toolCalls = calls.map((slot, i): ModelToolCall => {
      const providerData = writeProviderData({
        providerOptions: slot.providerOptions,
        reasoning: i === 0 ? kept : undefined,
      });
      const call = { id: slot.id, name: slot.name, arguments: parseInput(slot.final ?? slot.input) };
      return providerData === undefined ? call : { ...call, providerData };
    });
    return {
      message:
        toolCalls.length === 0
          ? { role: 'assistant', content: this.#text }
          : { role: 'assistant', content: this.#text, toolCalls },
      usage: this.#usage,
      reasoning: this.#reasoning === '' ? undefined : this.#reasoning,
      model: this.#model,
      finishReason: finishReasonOf(this.#finish),
    };
  }
}

/** A call's JSON input as the object it encodes (`{}` for none); text that is not JSON is kept as text. */
function parseInput(input: string): unknown {
  if (input.trim() === '') return {};
  try {
    return JSON.parse(input) as unknown;
  } catch {
    return input;
  }
}
