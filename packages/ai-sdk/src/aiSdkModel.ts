import type {
  JSONSchema7,
  LanguageModelV2,
  LanguageModelV3,
  LanguageModelV4,
  LanguageModelV4CallOptions,
} from '@ai-sdk/provider';
import {
  CancelledError,
  type CancelReason,
  InvalidArgumentError,
  isTroupeError,
  type Model,
  type ModelRequest,
  type ModelResponse,
  type OutputSpec,
  type ToolSpec,
} from '@troupe/core';
import { keepAliveClock } from '@troupe/core/internal';
import {
  type AiSdkModelOptions,
  type ResolvedAiSdkModelOptions,
  resolveAiSdkModelOptions,
} from './AiSdkModelOptions.js';
import { isRetryable } from './internal/AttemptFailure.js';
import { abortableSleep } from './internal/abortableSleep.js';
import { asLanguageModelV4 } from './internal/asLanguageModelV4.js';
import { backoffDelay, parseRetryAfter } from './internal/retryPolicy.js';
import { runAttempt } from './internal/runAttempt.js';
import { type FailureContext, overCapError, toModelError } from './internal/toModelError.js';
import { toFunctionTools } from './toFunctionTools.js';
import { toLanguageModelPrompt } from './toLanguageModelPrompt.js';

/**
 * A language model of the AI SDK's provider specification, of any version it
 * still speaks: what `anthropic('claude-sonnet-4-5')`, `google('gemini-2.5-flash')`,
 * `openai('gpt-4.1')`, `bedrock(...)` and every other provider package return.
 *
 * @example
 * ```ts
 * import { MockLanguageModelV4 } from 'ai/test'
 *
 * const language: AiSdkLanguageModel = new MockLanguageModelV4()
 * const model = aiSdkModel(language)
 * ```
 */
export type AiSdkLanguageModel = LanguageModelV4 | LanguageModelV3 | LanguageModelV2;

/**
 * A {@link Model} on an AI SDK provider's language model, as {@link aiSdkModel} makes it.
 *
 * @example
 * ```ts
 * import { createAnthropic } from '@ai-sdk/anthropic'
 *
 * const model: AiSdkModel = aiSdkModel(createAnthropic({ apiKey: 'sk-ant-...' })('claude-sonnet-4-5'))
 * console.log(model.provider, model.name) // 'anthropic.messages' 'claude-sonnet-4-5'
 * ```
 */
export interface AiSdkModel extends Model {
  /** The provider's model id (`claude-sonnet-4-5`). */
  readonly name: string;
  /** The provider's name (`anthropic.messages`), or the `provider` option. */
  readonly provider: string;
  /** The options in force, defaulted. */
  readonly options: ResolvedAiSdkModelOptions;
  /** The language model this one calls. */
  readonly languageModel: AiSdkLanguageModel;
}

const VERSIONS: ReadonlySet<unknown> = new Set(['v2', 'v3', 'v4']);

/**
 * A Troupe model on any AI SDK provider: Anthropic, Google (Gemini, Vertex),
 * OpenAI, Amazon Bedrock, Mistral, Groq, xAI, an OpenAI-compatible server,
 * and every provider package of the language model specification (versions
 * 2 to 4; 2 and 3 are adapted by the AI SDK's `ai` package, needed then only).
 * The provider package does the talking; this adapter gives it Troupe's
 * transcript and tools and turns what it streams back into Troupe's answer.
 *
 * - **Where:** construct it in the agent module, so it lives in the worker
 *   that runs the agent, and its key is read in that worker.
 * - **Streaming:** on by default; `request.onDelta` gets every text,
 *   reasoning and tool-call delta in order.
 * - **Tools:** Troupe's tools go to the provider as function tools (their
 *   zod schemas as JSON Schema); the calls it answers with come back with
 *   their arguments parsed, and what the provider needs back on the next turn
 *   (a thinking block's signature, a thought signature) rides on the calls.
 * - **Usage:** input tokens (cached ones counted in `cachedInputTokens`),
 *   output tokens (reasoning in `reasoningTokens`); the finish reason as
 *   `stop`, `tool_calls`, `length`, `content_filter`, ...
 * - **Retries:** 408, 409, 429, 5xx (529 included) and connection errors,
 *   with full-jitter exponential backoff, `retry-after(-ms)` honoured up to
 *   `retryAfterCapMs`; `maxAttempts` per call; never once a delta has been
 *   delivered; other 4xx never.
 * - **Cancellation:** the request's `signal` aborts the wait for the
 *   response, the backoff sleep and the stream; the call rejects at once with
 *   a `CancelledError` (the signal's reason when it is one, else `user`).
 * - **Errors:** a {@link ModelError} whose one-line message says what to fix.
 *
 * Options are checked here, once: a bad one throws an `InvalidArgumentError`
 * naming it. The provider itself (key, base URL, `fetch`) is configured with
 * its own factory.
 *
 * @example
 * ```ts
 * // agents/helper.ts — runs in a worker
 * import { anthropic } from '@ai-sdk/anthropic'
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
 *   model: aiSdkModel(anthropic('claude-sonnet-4-5'), { maxOutputTokens: 1024 }),
 *   tools: [weather],
 * })
 * ```
 */
export function aiSdkModel(languageModel: AiSdkLanguageModel, options: AiSdkModelOptions = {}): AiSdkModel {
  if (typeof languageModel === 'string') {
    throw new InvalidArgumentError(
      `aiSdkModel: got the model id "${String(languageModel)}"; pass a provider's model object, e.g. aiSdkModel(anthropic('claude-sonnet-4-5')) (ids as strings go through the AI SDK's gateway, which this package does not use)`,
    );
  }
  const candidate = languageModel as Partial<LanguageModelV4> | null;
  if (
    typeof candidate !== 'object' ||
    candidate === null ||
    typeof candidate.doStream !== 'function' ||
    typeof candidate.doGenerate !== 'function'
  ) {
    throw new InvalidArgumentError(
      "aiSdkModel: pass a language model of an AI SDK provider package, e.g. aiSdkModel(anthropic('claude-sonnet-4-5'))",
    );
  }
  if (!VERSIONS.has(candidate.specificationVersion)) {
    throw new InvalidArgumentError(
      `aiSdkModel: the model implements version ${String(candidate.specificationVersion)} of the language model specification; this package speaks versions v2 to v4: use a provider package of AI SDK 5 to 7`,
    );
  }
  const resolved = resolveAiSdkModelOptions(options);
  const clock = resolved.clock ?? keepAliveClock;
  const modelId = String(languageModel.modelId);
  const provider = resolved.provider ?? String(languageModel.provider);
  let v4: Promise<LanguageModelV4> | undefined;
  const toolCache = new WeakMap<readonly ToolSpec[], ReturnType<typeof toFunctionTools>>();
  const functionTools = (tools: readonly ToolSpec[]): ReturnType<typeof toFunctionTools> => {
    let converted = toolCache.get(tools);
    if (converted === undefined) {
      converted = toFunctionTools(tools);
      toolCache.set(tools, converted);
    }
    return converted;
  };
  const settings: Omit<LanguageModelV4CallOptions, 'prompt' | 'tools' | 'toolChoice' | 'abortSignal'> = {
    ...(resolved.maxOutputTokens === undefined ? {} : { maxOutputTokens: resolved.maxOutputTokens }),
    ...(resolved.temperature === undefined ? {} : { temperature: resolved.temperature }),
    ...(resolved.topP === undefined ? {} : { topP: resolved.topP }),
    ...(resolved.topK === undefined ? {} : { topK: resolved.topK }),
    ...(resolved.seed === undefined ? {} : { seed: resolved.seed }),
    ...(resolved.stopSequences === undefined ? {} : { stopSequences: [...resolved.stopSequences] }),
    ...(resolved.reasoning === undefined ? {} : { reasoning: resolved.reasoning }),
    ...(resolved.providerOptions === undefined ? {} : { providerOptions: resolved.providerOptions }),
    ...(Object.keys(resolved.headers).length === 0 ? {} : { headers: { ...resolved.headers } }),
  };

  const generate = async (request: ModelRequest): Promise<ModelResponse> => {
    const { signal } = request;
    if (signal.aborted) throw cancelled(signal);
    v4 ??= asLanguageModelV4(languageModel);
    v4.catch(() => {
      v4 = undefined;
    });
    const model = await v4;
    if (signal.aborted) throw cancelled(signal);
    const tools = request.tools.length === 0 ? undefined : functionTools(request.tools);
    const output = resolved.structuredOutput === 'response_format' ? request.output : undefined;
    const callOptions: Omit<LanguageModelV4CallOptions, 'abortSignal'> = {
      ...settings,
      prompt: toLanguageModelPrompt(request.messages),
      // The agent's structured output, as the provider's JSON response format: a provider that
      // supports it holds the answer to the schema (Anthropic natively, or with its own JSON tool
      // whose call it turns back into text); one that does not warns and ignores it. The loop
      // checks the answer against the agent's schema either way.
      ...(output === undefined ? {} : { responseFormat: responseFormatOf(output) }),
      ...(tools === undefined ? {} : { tools }),
      ...(tools === undefined || resolved.toolChoice === undefined
        ? {}
        : { toolChoice: { type: resolved.toolChoice } }),
    };
    for (let attempts = 1; ; attempts++) {
      const outcome = await runAttempt({
        model,
        options: callOptions,
        stream: resolved.stream,
        signal,
        onDelta: resolved.stream ? request.onDelta : undefined,
        clock,
        timeoutMs: resolved.timeoutMs,
        streamIdleTimeoutMs: resolved.streamIdleTimeoutMs,
      });
      if (outcome.ok) {
        const { answer } = outcome;
        return {
          message: answer.message,
          usage: answer.usage,
          reasoning: answer.reasoning,
          info: {
            model: answer.model ?? modelId,
            attempts,
            timeToFirstTokenMs: outcome.timeToFirstTokenMs,
            finishReason: answer.finishReason,
          },
        };
      }
      const { failure } = outcome;
      if (failure.kind === 'cancel') throw cancelled(signal);
      // An HTTP date in `retry-after` is wall-clock time: compared with Date.now(), not the injected clock.
      const retryAfter = failure.kind === 'status' ? parseRetryAfter(failure.headers, Date.now()) : undefined;
      const ctx: FailureContext = {
        provider,
        modelId,
        attempts,
        timeoutMs: resolved.timeoutMs,
        streamIdleTimeoutMs: resolved.streamIdleTimeoutMs,
        answering: outcome.answering,
        retryAfterMs: retryAfter,
      };
      if (!isRetryable(failure) || outcome.delivered > 0 || attempts >= resolved.maxAttempts) {
        throw toModelError(failure, ctx);
      }
      if (failure.kind === 'status' && retryAfter !== undefined && retryAfter > resolved.retryAfterCapMs) {
        throw overCapError(failure, retryAfter, resolved.retryAfterCapMs, ctx);
      }
      const delay =
        retryAfter ?? backoffDelay(attempts, resolved.backoffBaseMs, resolved.backoffMaxMs, resolved.random);
      try {
        await abortableSleep(delay, signal, clock);
      } catch {
        throw cancelled(signal);
      }
    }
  };

  return Object.freeze({ name: modelId, provider, options: resolved, languageModel, generate });
}

// JSON Schema as the provider specification types it (the output's schema is plain JSON Schema, made by core).
function responseFormatOf(output: OutputSpec): NonNullable<LanguageModelV4CallOptions['responseFormat']> {
  return { type: 'json', schema: output.schema as JSONSchema7, name: output.name };
}

function cancelled(signal: AbortSignal): CancelledError {
  const reason: unknown = signal.reason;
  const why: CancelReason = isTroupeError(reason, 'ERR_CANCELLED') ? (reason as CancelledError).reason : 'user';
  return new CancelledError(why, `the model call was cancelled (${why})`);
}
