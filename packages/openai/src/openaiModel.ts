import {
  CancelledError,
  type CancelReason,
  isTroupeError,
  type Model,
  type ModelRequest,
  type ModelResponse,
  type ModelToolCall,
  type OutputSpec,
  type ToolSpec,
} from '@troupe/core';
import { keepAliveClock } from '@troupe/core/internal';
import OpenAI from 'openai';
import type { ChatCompletionCreateParamsBase, ChatCompletionFunctionTool } from 'openai/resources/chat/completions';
import type { ResponseFormatJSONSchema } from 'openai/resources/shared';
import { isRetryable } from './internal/AttemptFailure.js';
import { abortableSleep } from './internal/abortableSleep.js';
import { nodeFetch } from './internal/nodeFetch.js';
import { backoffDelay, parseRetryAfter } from './internal/retryPolicy.js';
import { runAttempt } from './internal/runAttempt.js';
import { dropStrictNulls } from './internal/strictSchema.js';
import {
  answerOfJsonSchema,
  answerOfOutputTool,
  jsonSchemaFormat,
  outputTool,
  type StructuredOutputMode,
} from './internal/structuredOutput.js';
import { type FailureContext, overCapError, secretsOf, toModelError } from './internal/toModelError.js';
import {
  type OpenAIModelOptions,
  type ResolvedOpenAIModelOptions,
  resolveOpenAIModelOptions,
} from './OpenAIModelOptions.js';
import { toChatMessages } from './toChatMessages.js';
import { toChatTools } from './toChatTools.js';

/**
 * A {@link Model} on an OpenAI-compatible chat-completions server, as {@link openaiModel} makes it.
 *
 * @example
 * ```ts
 * const model: OpenAIModel = openaiModel({ model: 'llama3.2', baseURL: 'http://127.0.0.1:11434/v1' })
 * console.log(model.provider, model.options.maxAttempts) // 'openai-compatible' 3
 * ```
 */
export interface OpenAIModel extends Model {
  readonly name: string;
  readonly provider: string;
  /** The options in force, defaulted (the key is not among them). */
  readonly options: Omit<ResolvedOpenAIModelOptions, 'apiKey'>;
}

/**
 * A model on any OpenAI-compatible chat-completions server: OpenAI, Ollama,
 * vLLM, llama.cpp server, LM Studio, OpenRouter. Built on the official
 * `openai` package (a peer dependency, 6.x or 7.x) with the SDK's retries off.
 *
 * - **Where:** construct it in the agent module, so it lives in the worker
 *   that runs the agent; the key never crosses a thread.
 * - **Streaming:** on by default; `request.onDelta` gets every text,
 *   reasoning and tool-call delta in order. What real servers send is
 *   normalised (see {@link ChatStreamAccumulator}).
 * - **Retries:** 408, 409, 429, 5xx and connection errors, with full-jitter
 *   exponential backoff, `retry-after(-ms)` honoured up to `retryAfterCapMs`
 *   (beyond it: `ERR_MODEL_RATE_LIMITED` at once); `maxAttempts` per call;
 *   never once a delta has been delivered; other 4xx never.
 * - **Cancellation:** the request's `signal` aborts the connect, the wait for
 *   headers, the backoff sleep and the stream; the call rejects at once with
 *   a `CancelledError` (the signal's reason when it is one, else `user`) and
 *   the socket is closed. A stream silent for `streamIdleTimeoutMs` fails with
 *   `ERR_MODEL_STREAM_IDLE`.
 * - **Errors:** a {@link ModelError} whose one-line message says what to fix.
 * - **Structured output:** an agent's `output` is asked for as a strict JSON
 *   schema response format, or with a final-answer tool (`structuredOutput`);
 *   a server that refuses the response format (a 400) is asked again with the
 *   tool, once, and this model keeps to the tool afterwards.
 *
 * Options are checked here, once: a bad one throws an `InvalidArgumentError`
 * naming it. The environment is read for `OPENAI_API_KEY` only, when
 * `apiKey` is not given.
 *
 * @example
 * ```ts
 * // agents/helper.ts — runs in a worker
 * import { defineAgent, defineTool } from '@troupe/core'
 *
 * const weather = defineTool({
 *   name: 'weather',
 *   description: 'Current weather of a city',
 *   parameters: z.object({ city: z.string() }),
 *   execute: ({ city }) => ({ city, tempC: 4 }),
 * })
 * export default defineAgent({
 *   name: 'helper',
 *   module: import.meta.url,
 *   instructions: 'Answer weather questions.',
 *   model: openaiModel({ model: 'llama3.2', baseURL: 'http://127.0.0.1:11434/v1' }),
 *   tools: [weather],
 * })
 * ```
 */
export function openaiModel(options: OpenAIModelOptions): OpenAIModel {
  const resolved = resolveOpenAIModelOptions(options, process.env);
  // What no error message may repeat (a server echoing the key, credentials in the URL).
  const secrets = secretsOf(resolved.apiKey, resolved.baseURL, resolved.headers);
  const { apiKey, ...visible } = resolved;
  const client = new OpenAI({
    // The SDK insists on a key; a keyless server gets a placeholder and no Authorization header.
    apiKey: apiKey ?? 'no-key',
    baseURL: resolved.baseURL,
    maxRetries: 0,
    // Its abort closes the socket in every phase, a pending TLS handshake included (see nodeFetch).
    fetch: nodeFetch(),
    // Passed explicitly so that the SDK reads none of them from the environment.
    organization: null,
    project: null,
    webhookSecret: null,
    adminAPIKey: null,
    logLevel: 'off',
    defaultHeaders: { ...resolved.headers, ...(apiKey === undefined ? { Authorization: null } : {}) },
  });
  const clock = resolved.clock ?? keepAliveClock;
  const toolCache = new WeakMap<readonly ToolSpec[], ChatCompletionFunctionTool[]>();
  const chatTools = (tools: readonly ToolSpec[]): ChatCompletionFunctionTool[] => {
    let converted = toolCache.get(tools);
    if (converted === undefined) {
      converted = toChatTools(tools, { strict: resolved.strictTools });
      toolCache.set(tools, converted);
    }
    return converted;
  };

  // Per model: a server that refused the response format gets the final-answer tool from then on.
  let outputMode: StructuredOutputMode = resolved.structuredOutput;
  const outputAsks = new WeakMap<OutputSpec, { format: ResponseFormatJSONSchema; tool: ChatCompletionFunctionTool }>();
  const withOutput = (body: ChatBody, output: OutputSpec, mode: StructuredOutputMode): ChatBody => {
    let asks = outputAsks.get(output);
    if (asks === undefined) {
      asks = { format: jsonSchemaFormat(output), tool: outputTool(output, resolved.strictTools) };
      outputAsks.set(output, asks);
    }
    return mode === 'json_schema'
      ? { ...body, response_format: asks.format }
      : { ...body, tools: [...(body.tools ?? []), asks.tool] };
  };

  const generate = async (request: ModelRequest): Promise<ModelResponse> => {
    const { signal, output } = request;
    if (signal.aborted) throw cancelled(signal);
    // Time to first token counts from here, not from the attempt that answered: a retried call's
    // caller waited for the failed attempts and the backoff too.
    const startedAt = clock.now();
    const tools = request.tools.length === 0 ? undefined : chatTools(request.tools);
    const plain: ChatBody = {
      ...resolved.extraBody,
      model: resolved.model,
      messages: toChatMessages(request.messages),
      ...(tools === undefined ? {} : { tools }),
      ...(tools !== undefined && resolved.parallelToolCalls !== undefined
        ? { parallel_tool_calls: resolved.parallelToolCalls }
        : {}),
      ...(resolved.temperature === undefined ? {} : { temperature: resolved.temperature }),
    };
    let mode = outputMode;
    let body = output === undefined ? plain : withOutput(plain, output, mode);
    for (let attempts = 1; ; attempts++) {
      const outcome = await runAttempt({
        client,
        body,
        stream: resolved.stream,
        signal,
        onDelta: resolved.stream ? request.onDelta : undefined,
        clock,
        timeoutMs: resolved.timeoutMs,
        streamIdleTimeoutMs: resolved.streamIdleTimeoutMs,
      });
      if (outcome.ok) {
        const { answer } = outcome;
        if (output !== undefined) outputMode = mode;
        let message =
          output !== undefined && mode === 'tool'
            ? answerOfOutputTool(answer.message, output, resolved.strictTools)
            : answer.message;
        if (resolved.strictTools && message.toolCalls !== undefined) {
          message = { ...message, toolCalls: message.toolCalls.map((c) => withoutStrictNulls(c, request.tools)) };
        }
        if (output !== undefined && mode === 'json_schema') message = answerOfJsonSchema(message, output);
        return {
          message,
          usage: answer.usage,
          reasoning: answer.reasoning,
          info: {
            model: answer.model ?? resolved.model,
            attempts,
            timeToFirstTokenMs: outcome.firstDeltaAt === undefined ? undefined : outcome.firstDeltaAt - startedAt,
            finishReason: answer.finishReason,
          },
        };
      }
      const { failure } = outcome;
      if (failure.kind === 'cancel') throw cancelled(signal);
      if (output !== undefined && mode === 'json_schema' && failure.kind === 'status' && failure.status === 400) {
        // A server without response formats: asked again with the final-answer tool, once.
        mode = 'tool';
        body = withOutput(plain, output, mode);
        continue;
      }
      // An HTTP date in `retry-after` is wall-clock time: compared with Date.now(), not the injected clock.
      const retryAfter = failure.kind === 'status' ? parseRetryAfter(failure.headers, Date.now()) : undefined;
      const ctx: FailureContext = {
        baseURL: resolved.baseURL,
        model: resolved.model,
        attempts,
        timeoutMs: resolved.timeoutMs,
        streamIdleTimeoutMs: resolved.streamIdleTimeoutMs,
        answering: outcome.answering,
        retryAfterMs: retryAfter,
        maxAttempts: resolved.maxAttempts,
        secrets,
      };
      if (!isRetryable(failure) || outcome.delivered > 0) throw toModelError(failure, ctx);
      // Before the attempt budget: a server that asks for days is the explanation, whether or not
      // an attempt was left (with maxAttempts: 1 none is).
      if (failure.kind === 'status' && retryAfter !== undefined && retryAfter > resolved.retryAfterCapMs) {
        throw overCapError(failure, retryAfter, resolved.retryAfterCapMs, ctx);
      }
      if (attempts >= resolved.maxAttempts) throw toModelError(failure, ctx);
      const delay =
        retryAfter ?? backoffDelay(attempts, resolved.backoffBaseMs, resolved.backoffMaxMs, resolved.random);
      try {
        await abortableSleep(delay, signal, clock);
      } catch {
        throw cancelled(signal);
      }
    }
  };

  return Object.freeze({ name: resolved.model, provider: resolved.provider, options: visible, generate });
}

type ChatBody = Omit<ChatCompletionCreateParamsBase, 'stream' | 'stream_options'>;

function cancelled(signal: AbortSignal): CancelledError {
  const reason: unknown = signal.reason;
  const why: CancelReason = isTroupeError(reason, 'ERR_CANCELLED') ? (reason as CancelledError).reason : 'user';
  return new CancelledError(why, `the model call was cancelled (${why})`);
}

function withoutStrictNulls(call: ModelToolCall, tools: readonly ToolSpec[]): ModelToolCall {
  if (typeof call.arguments !== 'object' || call.arguments === null) return call;
  const spec = tools.find((t) => t.name === call.name);
  return spec === undefined ? call : { ...call, arguments: dropStrictNulls(call.arguments, spec.parameters) };
}
