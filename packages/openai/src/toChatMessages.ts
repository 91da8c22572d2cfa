import type { AssistantMessage, Message, ToolMessage } from '@troupe/core';
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';

/**
 * The result sent for an assistant tool call that has none in the transcript.
 *
 * @example
 * ```ts
 * const messages = toChatMessages([
 *   { role: 'user', content: 'Weather?' },
 *   { role: 'assistant', content: '', toolCalls: [{ id: 'call_1', name: 'weather', arguments: {} }] },
 * ])
 * // the last message is { role: 'tool', tool_call_id: 'call_1', content: JSON.stringify(MISSING_RESULT) }
 * ```
 */
export const MISSING_RESULT = Object.freeze({
  error: 'no result was recorded for this tool call (the run was interrupted or the call was dropped)',
  code: 'ERR_MISSING_RESULT',
});

/**
 * Troupe's transcript as chat-completions messages.
 *
 * - An assistant message's tool calls become `tool_calls` (arguments as JSON
 *   text; text the model sent that was not valid JSON is sent back as it was).
 * - A tool result becomes a `role: 'tool'` message with the call's
 *   `tool_call_id`, placed right after the assistant message that asked for
 *   it, in call order; its content is the value as JSON (a string as is).
 * - Every assistant tool call is answered: one without a result gets
 *   {@link MISSING_RESULT}, so the server never sees a dangling id.
 * - A tool result whose call is not in the preceding assistant message is
 *   left out (servers refuse such a request).
 *
 * @example
 * ```ts
 * toChatMessages([{ role: 'user', content: 'hi' }]) // [{ role: 'user', content: 'hi' }]
 * ```
 */
export function toChatMessages(messages: readonly Message[]): ChatCompletionMessageParam[] {
  const out: ChatCompletionMessageParam[] = [];
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i] as Message;
    switch (m.role) {
      case 'system':
      case 'user':
        out.push({ role: m.role, content: m.content });
        break;
      case 'tool':
        // A result outside an assistant turn answers nothing the server knows of.
        break;
      case 'assistant': {
        const calls = m.toolCalls ?? [];
        if (calls.length === 0) {
          out.push({ role: 'assistant', content: m.content });
          break;
        }
        out.push(assistantWithCalls(m));
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
        for (const call of calls) {
          const result = results.get(call.id);
          out.push({
            role: 'tool',
            tool_call_id: call.id,
            content: result === undefined ? JSON.stringify(MISSING_RESULT) : resultText(result.content),
          });
        }
        for (const other of others)
          out.push({ role: other.role as 'system' | 'user', content: other.content as string });
        i = j - 1;
        break;
      }
      default:
        assertNever(m);
    }
  }
  return out;
}

function assistantWithCalls(m: AssistantMessage): ChatCompletionMessageParam {
  return {
    role: 'assistant',
    // `null` is what the API documents for a message that only calls tools.
    content: m.content === '' ? null : m.content,
    tool_calls: (m.toolCalls ?? []).map((c) => ({
      id: c.id,
      type: 'function' as const,
      function: { name: c.name, arguments: argumentsText(c.arguments) },
    })),
  };
}

function argumentsText(args: unknown): string {
  if (typeof args === 'string') return args;
  return JSON.stringify(args ?? {}) ?? '{}';
}

function resultText(content: unknown): string {
  if (typeof content === 'string') return content;
  try {
    return JSON.stringify(content) ?? 'null';
  } catch {
    return String(content);
  }
}

function assertNever(value: never): never {
  throw new Error(`unknown message role: ${JSON.stringify(value)}`);
}
