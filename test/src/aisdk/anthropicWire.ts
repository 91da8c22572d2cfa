// Anthropic's Messages API as its server streams it (server-sent events with
// an `event:` name and a JSON `data:` line), for the test's server on
// 127.0.0.1 (the scripted ChatServer) that `@ai-sdk/anthropic` talks to.
import type { ServerResponse } from 'node:http';
import { type Handler, json, startSse } from '../openai/chatServer.js';

/** One streamed event. */
export function anthropicEvent(res: ServerResponse, type: string, data: Record<string, unknown>): void {
  res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
}

/** Token counts as Anthropic reports them. */
export interface AnthropicUsage {
  readonly input: number;
  readonly output: number;
  readonly cacheRead?: number;
  readonly cacheWrite?: number;
}

/** What one scripted answer holds, in this order. */
export interface AnthropicAnswer {
  readonly model?: string;
  readonly thinking?: { readonly text: string; readonly signature: string };
  /** Text, in the pieces it is streamed in. */
  readonly text?: readonly string[];
  /** A tool call, its JSON input streamed in the pieces given. */
  readonly toolUse?: { readonly id: string; readonly name: string; readonly inputPieces: readonly string[] };
  readonly stopReason?: 'end_turn' | 'tool_use' | 'max_tokens';
  readonly usage?: AnthropicUsage;
}

/** The `message_start` event of an answer. */
export function messageStart(res: ServerResponse, answer: Pick<AnthropicAnswer, 'model' | 'usage'> = {}): void {
  const usage = answer.usage ?? { input: 10, output: 1 };
  anthropicEvent(res, 'message_start', {
    message: {
      id: 'msg_test',
      type: 'message',
      role: 'assistant',
      model: answer.model ?? 'claude-test',
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: {
        input_tokens: usage.input,
        output_tokens: 1,
        cache_read_input_tokens: usage.cacheRead ?? 0,
        cache_creation_input_tokens: usage.cacheWrite ?? 0,
      },
    },
  });
}

/** Writes one text block (`index`) of `pieces`. */
export function textBlock(res: ServerResponse, index: number, pieces: readonly string[]): void {
  anthropicEvent(res, 'content_block_start', { index, content_block: { type: 'text', text: '' } });
  for (const text of pieces) {
    anthropicEvent(res, 'content_block_delta', { index, delta: { type: 'text_delta', text } });
  }
  anthropicEvent(res, 'content_block_stop', { index });
}

/** A whole streamed answer. */
export function anthropicAnswer(answer: AnthropicAnswer): Handler {
  return (res) => {
    startSse(res);
    messageStart(res, answer);
    let index = 0;
    if (answer.thinking !== undefined) {
      anthropicEvent(res, 'content_block_start', {
        index,
        content_block: { type: 'thinking', thinking: '', signature: '' },
      });
      anthropicEvent(res, 'content_block_delta', {
        index,
        delta: { type: 'thinking_delta', thinking: answer.thinking.text },
      });
      anthropicEvent(res, 'content_block_delta', {
        index,
        delta: { type: 'signature_delta', signature: answer.thinking.signature },
      });
      anthropicEvent(res, 'content_block_stop', { index });
      index++;
    }
    if (answer.text !== undefined) textBlock(res, index++, answer.text);
    if (answer.toolUse !== undefined) {
      const { id, name, inputPieces } = answer.toolUse;
      anthropicEvent(res, 'content_block_start', { index, content_block: { type: 'tool_use', id, name, input: {} } });
      for (const partial_json of inputPieces) {
        anthropicEvent(res, 'content_block_delta', { index, delta: { type: 'input_json_delta', partial_json } });
      }
      anthropicEvent(res, 'content_block_stop', { index });
      index++;
    }
    anthropicEvent(res, 'message_delta', {
      delta: {
        stop_reason: answer.stopReason ?? (answer.toolUse === undefined ? 'end_turn' : 'tool_use'),
        stop_sequence: null,
      },
      usage: { output_tokens: answer.usage?.output ?? 5 },
    });
    anthropicEvent(res, 'message_stop', {});
    res.end();
  };
}

/** A text answer. */
export const anthropicText = (text: string, usage?: AnthropicUsage): Handler =>
  anthropicAnswer({ text: [text], ...(usage === undefined ? {} : { usage }) });

/** An error response as Anthropic sends one: `{ type: 'error', error: { type, message } }`. */
export function anthropicError(
  status: number,
  type: string,
  message: string,
  headers: Record<string, string> = {},
): Handler {
  return (res) => json(res, status, { type: 'error', error: { type, message } }, headers);
}
