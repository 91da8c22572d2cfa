// Structured output on chat completions. The request's `output` is asked for
// as a JSON schema response format (`strict`, so every optional property is
// sent as required-but-nullable, see strictSchema.ts) or, on a server without
// response formats, as a final-answer function the model calls with the value.
// Either way the answer the loop gets is text: the JSON of the value, with the
// `null`s strict mode forced on optional properties dropped. The loop checks it
// against the agent's schema.
import type { AssistantMessage, OutputSpec } from '@troupe/core';
import type { ChatCompletionFunctionTool } from 'openai/resources/chat/completions';
import type { ResponseFormatJSONSchema } from 'openai/resources/shared';
import { dropStrictNulls, toStrictSchema, withoutDialect } from './strictSchema.js';

/** How a model asks for structured output: a JSON schema response format, or a final-answer tool. */
export type StructuredOutputMode = 'json_schema' | 'tool';

/** The response format that asks for `output`. */
export function jsonSchemaFormat(output: OutputSpec): ResponseFormatJSONSchema {
  return {
    type: 'json_schema',
    json_schema: { name: output.name, schema: toStrictSchema(output.schema), strict: true },
  };
}

/** The final-answer tool that asks for `output`: its arguments are the value. */
export function outputTool(output: OutputSpec, strict: boolean): ChatCompletionFunctionTool {
  return {
    type: 'function',
    function: {
      name: output.name,
      description:
        'Give your final answer with this function, once you have it, instead of answering in text: its arguments are the answer.',
      parameters: strict ? toStrictSchema(output.schema) : withoutDialect(output.schema),
      ...(strict ? { strict: true } : {}),
    },
  };
}

/**
 * The answer of a model that had the final-answer tool: when it called the
 * tool, the arguments' JSON as the answer's text (the answer ends there: its
 * other calls, if any, are not run); otherwise the answer as it came.
 */
export function answerOfOutputTool(message: AssistantMessage, output: OutputSpec, strict: boolean): AssistantMessage {
  const call = message.toolCalls?.find((c) => c.name === output.name);
  if (call === undefined) return message;
  const args = call.arguments;
  // Arguments that are not JSON stay the raw text: the loop tells the model so.
  const content =
    typeof args === 'string' ? args : JSON.stringify(strict ? dropStrictNulls(args, output.schema) : args);
  return { role: 'assistant', content };
}

/** The answer of a strict JSON schema response, with the `null`s strict mode forced on optional properties dropped. */
export function answerOfJsonSchema(message: AssistantMessage, output: OutputSpec): AssistantMessage {
  if (message.toolCalls !== undefined && message.toolCalls.length > 0) return message;
  let value: unknown;
  try {
    value = JSON.parse(message.content);
  } catch {
    return message;
  }
  const content = JSON.stringify(dropStrictNulls(value, output.schema));
  // Rewritten only when a null was dropped: the text otherwise stays what was streamed.
  return content === JSON.stringify(value) ? message : { ...message, content };
}
