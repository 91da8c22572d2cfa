import type {
  JSONValue,
  LanguageModelV4Message,
  LanguageModelV4Prompt,
  LanguageModelV4ReasoningPart,
  LanguageModelV4TextPart,
  LanguageModelV4ToolCallPart,
  LanguageModelV4ToolResultOutput,
  LanguageModelV4ToolResultPart,
  SharedV4ProviderOptions,
} from '@ai-sdk/provider';
import type { AssistantMessage, Message, ModelToolCall, ToolMessage } from '@troupe/core';
import { readProviderData } from './internal/providerData.js';

/**
 * The result sent for an assistant tool call that has none in the transcript.
 *
 * @example
 * ```ts
 * const prompt = toLanguageModelPrompt([
 *   { role: 'user', content: 'Weather?' },
 *   { role: 'assistant', content: '', toolCalls: [{ id: 'call_1', name: 'weather', arguments: {} }] },
 * ])
 * // the last message is a tool message whose result for call_1 is { type: 'error-json', value: MISSING_RESULT }
 * ```
 */
export const MISSING_RESULT = Object.freeze({
  error: 'no result was recorded for this tool call (the run was interrupted or the call was dropped)',
  code: 'ERR_MISSING_RESULT',
});

/**
 * Troupe's transcript as the AI SDK's language-model prompt, which every
 * provider package turns into its own wire format.
 *
 * - System and user messages become `system` and `user` (one text part).
 * - An assistant message becomes its reasoning parts (only those a provider
 *   asked to get back, kept with its first tool call, e.g. Anthropic's signed
 *   thinking), its text, and its tool calls (arguments as the object the
 *   model sent; text that was not valid JSON is sent back as it was), each
 *   with the provider options it came with.
 * - The results of a turn's calls follow it as one `tool` message, in call
 *   order: a string as `text`, other values as `json`, an error result as
 *   `error-json` (`{ error, code }`). A call without a result gets
 *   {@link MISSING_RESULT}, so the provider never sees a dangling id; a
 *   result whose call is not in the preceding assistant message is left out.
 *
 * @example
 * ```ts
 * toLanguageModelPrompt([{ role: 'user', content: 'hi' }]) // [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }]
 * ```
 */
export function toLanguageModelPrompt(messages: readonly Message[]): LanguageModelV4Prompt {
  const out: LanguageModelV4Message[] = [];
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i] as Message;
    switch (m.role) {
      case 'system':
        out.push({ role: 'system', content: m.content });
        break;
      case 'user':
        out.push({ role: 'user', content: [{ type: 'text', text: m.content }] });
        break;
      case 'tool':
        // A result outside an assistant turn answers nothing the provider knows of.
        break;
      case 'assistant': {
        const calls = m.toolCalls ?? [];
        out.push(assistant(m));
        if (calls.length === 0) break;
        // The turn runs until the next assistant message: its results, and anything else said meanwhile.
        const results = new Map<string, ToolMessage>();
        const others: Message[] = [];
        let j = i + 1;
        for (; j < messages.length; j++) {
          const next = messages[j] as Message;
          if (next.role === 'assistant') break;
          if (next.role === 'tool') {
            if (!results.has(next.toolCallId)) results.set(next.toolCallId, next);
          } else others.push(next);
        }
        out.push({
          role: 'tool',
          content: calls.map(
            (call): LanguageModelV4ToolResultPart => ({
              type: 'tool-result',
              toolCallId: call.id,
              toolName: call.name,
              output: output(results.get(call.id)),
            }),
          ),
        });
        for (const other of others) {
          out.push(
            other.role === 'system'
              ? { role: 'system', content: other.content as string }
              : { role: 'user', content: [{ type: 'text', text: other.content as string }] },
          );
        }
        i = j - 1;
        break;
      }
      default:
        assertNever(m);
    }
  }
  return out;
}

function assistant(m: AssistantMessage): LanguageModelV4Message {
  const calls = m.toolCalls ?? [];
  const content: (LanguageModelV4ReasoningPart | LanguageModelV4TextPart | LanguageModelV4ToolCallPart)[] = [];
  const first = calls[0] === undefined ? undefined : readProviderData(calls[0].providerData);
  for (const r of first?.reasoning ?? []) {
    content.push(withOptions({ type: 'reasoning', text: r.text }, r.providerOptions));
  }
  if (m.content !== '') content.push({ type: 'text', text: m.content });
  for (const call of calls) content.push(toolCall(call));
  return { role: 'assistant', content };
}

function toolCall(call: ModelToolCall): LanguageModelV4ToolCallPart {
  const data = readProviderData(call.providerData);
  return withOptions(
    { type: 'tool-call', toolCallId: call.id, toolName: call.name, input: call.arguments ?? {} },
    data?.providerOptions,
  );
}

function withOptions<T extends object>(part: T, providerOptions: SharedV4ProviderOptions | undefined): T {
  return providerOptions === undefined ? part : { ...part, providerOptions };
}

function output(result: ToolMessage | undefined): LanguageModelV4ToolResultOutput {
  if (result === undefined) return { type: 'error-json', value: MISSING_RESULT };
  if (result.isError) return { type: 'error-json', value: json(result.content) };
  if (typeof result.content === 'string') return { type: 'text', value: result.content };
  return { type: 'json', value: json(result.content) };
}

/** A tool's value as JSON: what JSON cannot say (`undefined`, a `Map`, a cycle) as JSON would say it, or as text. */
function json(value: unknown): JSONValue {
  try {
    const text = JSON.stringify(value);
    return text === undefined ? null : (JSON.parse(text) as JSONValue);
  } catch {
    return String(value);
  }
}

function assertNever(value: never): never {
  throw new Error(`unknown message role: ${JSON.stringify(value)}`);
}
