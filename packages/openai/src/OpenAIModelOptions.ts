import { type Clock, InvalidArgumentError } from '@troupe/core';
import { z } from 'zod';

/**
 * What {@link openaiModel} accepts. Only `model` is required.
 *
 * @example
 * ```ts
 * const options: OpenAIModelOptions = {
 *   model: 'llama3.2',
 *   baseURL: 'http://127.0.0.1:11434/v1',
 *   maxAttempts: 2,
 *   temperature: 0,
 * }
 * const model = openaiModel(options)
 * ```
 */
export interface OpenAIModelOptions {
  /** The model to ask for (`gpt-4.1-mini`, `llama3.2`, `Qwen/Qwen2.5-7B-Instruct`). */
  readonly model: string;
  /** The server's OpenAI-compatible root, ending in `/v1` (default `https://api.openai.com/v1`). */
  readonly baseURL?: string | undefined;
  /**
   * The API key. Default: `OPENAI_API_KEY` from the environment when set.
   * May be omitted for servers without keys (Ollama, llama.cpp, vLLM): no
   * `Authorization` header is sent then. Required for `api.openai.com`.
   */
  readonly apiKey?: string | undefined;
  /** Send tools with `strict: true` (OpenAI structured outputs; see `toChatTools`). Default `false`. */
  readonly strictTools?: boolean | undefined;
  /**
   * How an agent's structured `output` is asked for: `json_schema`, a strict
   * JSON schema response format (default); or `tool`, a final-answer
   * function the model calls with the value, for servers without response
   * formats. A server that refuses the response format with a 400 is asked
   * again with the tool, and this model uses the tool from then on.
   */
  readonly structuredOutput?: 'json_schema' | 'tool' | undefined;
  /** Attempts per call, the first included (default 3). Retries never happen after the first token. */
  readonly maxAttempts?: number | undefined;
  /** The longest `retry-after` that is waited for (default 60 s); a longer one fails the call at once. */
  readonly retryAfterCapMs?: number | undefined;
  /** Backoff before the first retry, doubled for each next one, with full jitter (default 500 ms). */
  readonly backoffBaseMs?: number | undefined;
  /** The longest backoff (default 8 s). */
  readonly backoffMaxMs?: number | undefined;
  /** A stream that sends no delta for this long is aborted (default 120 s; keep-alive comments do not count). */
  readonly streamIdleTimeoutMs?: number | undefined;
  /** Stream the answer (default `true`); `false` asks for one JSON response. */
  readonly stream?: boolean | undefined;
  /**
   * Per attempt: until the response headers of a stream, or the whole of a
   * non-streamed response (default 600 s). An attempt that overruns is
   * retried; the last one fails with `ERR_MODEL_TIMEOUT`.
   */
  readonly timeoutMs?: number | undefined;
  /** Extra HTTP headers on every request. */
  readonly headers?: Readonly<Record<string, string>> | undefined;
  /** Who serves the model, for telemetry (default `openai` for api.openai.com, else `openai-compatible`). */
  readonly provider?: string | undefined;
  /** `parallel_tool_calls` to send; not sent when unset (some servers refuse it). */
  readonly parallelToolCalls?: boolean | undefined;
  /** Sampling temperature; not sent when unset. */
  readonly temperature?: number | undefined;
  /** More fields for the request body (`max_tokens`, `reasoning_effort`, `top_p`...); the fields Troupe sets win. */
  readonly extraBody?: Readonly<Record<string, unknown>> | undefined;
  /** Where time comes from (timers of the backoff, timeout and idle watch). For tests. */
  readonly clock?: Clock | undefined;
  /** A uniform draw in [0, 1) for the backoff jitter (default `Math.random`). For tests. */
  readonly random?: (() => number) | undefined;
}

/**
 * {@link OpenAIModelOptions} validated and defaulted.
 *
 * @example
 * ```ts
 * const resolved: ResolvedOpenAIModelOptions = resolveOpenAIModelOptions({ model: 'gpt-4.1-mini', apiKey: 'sk-test' }, {})
 * resolved.stream    // true
 * resolved.provider  // 'openai'
 * ```
 */
export interface ResolvedOpenAIModelOptions {
  readonly model: string;
  readonly baseURL: string;
  readonly apiKey: string | undefined;
  readonly strictTools: boolean;
  readonly structuredOutput: 'json_schema' | 'tool';
  readonly maxAttempts: number;
  readonly retryAfterCapMs: number;
  readonly backoffBaseMs: number;
  readonly backoffMaxMs: number;
  readonly streamIdleTimeoutMs: number;
  readonly stream: boolean;
  readonly timeoutMs: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly provider: string;
  readonly parallelToolCalls: boolean | undefined;
  readonly temperature: number | undefined;
  readonly extraBody: Readonly<Record<string, unknown>>;
  readonly clock: Clock | undefined;
  readonly random: () => number;
}

/**
 * OpenAI's own endpoint, the default `baseURL`.
 *
 * @example
 * ```ts
 * const model = openaiModel({ model: 'gpt-4.1-mini', baseURL: OPENAI_BASE_URL })
 * model.options.baseURL === OPENAI_BASE_URL // true, also when baseURL is left out
 * ```
 */
export const OPENAI_BASE_URL = 'https://api.openai.com/v1';

// The longest a timer can wait in Node (2^31 - 1 ms, ~24.8 days).
const MAX_TIMER_MS = 2_147_483_647;
const ms = (max = MAX_TIMER_MS) => z.number().int().min(1).max(max).optional();

const Schema = z.strictObject({
  model: z.string().trim().min(1),
  baseURL: z.url({ protocol: /^https?$/ }).optional(),
  apiKey: z.string().min(1).optional(),
  strictTools: z.boolean().optional(),
  structuredOutput: z.enum(['json_schema', 'tool']).optional(),
  maxAttempts: z.number().int().min(1).max(20).optional(),
  retryAfterCapMs: z.number().int().min(0).max(MAX_TIMER_MS).optional(),
  backoffBaseMs: z.number().int().min(0).max(MAX_TIMER_MS).optional(),
  backoffMaxMs: ms(),
  streamIdleTimeoutMs: ms(),
  stream: z.boolean().optional(),
  timeoutMs: ms(),
  headers: z.record(z.string(), z.string()).optional(),
  provider: z.string().min(1).optional(),
  parallelToolCalls: z.boolean().optional(),
  temperature: z.number().min(0).max(2).optional(),
  extraBody: z.record(z.string(), z.unknown()).optional(),
  clock: z
    .custom<Clock>((v) => typeof v === 'object' && v !== null && typeof (v as Clock).setTimeout === 'function')
    .optional(),
  random: z.custom<() => number>((v) => typeof v === 'function').optional(),
});

const HINTS: Record<string, string> = {
  model: 'pass the model name, e.g. model: "gpt-4.1-mini" or "llama3.2"',
  baseURL: 'pass an http(s) URL ending in /v1, e.g. "http://127.0.0.1:11434/v1" for Ollama',
  maxAttempts: 'pass an integer from 1 (no retries) to 20',
  temperature: 'pass a number from 0 to 2',
  timeoutMs: 'pass a whole number of milliseconds from 1 to 2147483647',
  streamIdleTimeoutMs: 'pass a whole number of milliseconds from 1 to 2147483647',
  backoffMaxMs: 'pass a whole number of milliseconds from 1 to 2147483647',
  backoffBaseMs: 'pass a whole number of milliseconds from 0 to 2147483647',
  retryAfterCapMs: 'pass a whole number of milliseconds from 0 (never wait) to 2147483647',
  apiKey: 'pass a non-empty string, or leave apiKey out for a server without keys',
  structuredOutput: 'pass "json_schema" (a response format, the default) or "tool" (a final-answer function)',
};

/**
 * Validate options once, at the edge, into a fully defaulted object. A bad
 * option throws an `InvalidArgumentError` naming it and what to pass.
 * `env` is read for `OPENAI_API_KEY` only when `apiKey` is not given.
 * `openaiModel` calls it; call it yourself to check a configuration early.
 *
 * @example
 * ```ts
 * const options = resolveOpenAIModelOptions({ model: 'llama3.2', baseURL: 'http://127.0.0.1:11434/v1' }, process.env)
 * options.maxAttempts // 3
 * ```
 */
export function resolveOpenAIModelOptions(
  options: OpenAIModelOptions,
  env: Readonly<Record<string, string | undefined>>,
): ResolvedOpenAIModelOptions {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidArgumentError('openaiModel: pass an options object, e.g. openaiModel({ model: "gpt-4.1-mini" })');
  }
  // `undefined` means "not given" for every option (callers spread partial configs).
  const given = Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined));
  const parsed = Schema.safeParse(given);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const key = String(issue?.path[0] ?? '');
    const value = (given as Record<string, unknown>)[key];
    // Secrets are never repeated: the key, headers (where gateways take keys), a URL's credentials.
    const shown =
      key === 'apiKey' || key === 'headers'
        ? '(hidden)'
        : key === 'baseURL' && typeof value === 'string'
          ? safeShow(value.replace(/\/\/[^/@]*@/, '//***@'))
          : safeShow(value);
    const what = issue?.code === 'unrecognized_keys' ? `unknown option ${issue.keys.join(', ')}` : `${key} is invalid`;
    const hint = HINTS[key] ?? issue?.message ?? '';
    throw new InvalidArgumentError(
      `openaiModel: ${what}${issue?.code === 'unrecognized_keys' ? '' : ` (got ${shown})`}: ${hint}`,
    );
  }
  const o = parsed.data;
  const baseURL = (o.baseURL ?? OPENAI_BASE_URL).replace(/\/+$/, '');
  const fromEnv = env.OPENAI_API_KEY;
  const apiKey = o.apiKey ?? (fromEnv !== undefined && fromEnv !== '' ? fromEnv : undefined);
  const isOpenAI = new URL(baseURL).hostname === 'api.openai.com';
  if (apiKey === undefined && isOpenAI) {
    throw new InvalidArgumentError(
      'openaiModel: no API key for api.openai.com: pass apiKey or set OPENAI_API_KEY (or point baseURL at a server that needs none)',
    );
  }
  const backoffBaseMs = o.backoffBaseMs ?? 500;
  return Object.freeze({
    model: o.model,
    baseURL,
    apiKey,
    strictTools: o.strictTools ?? false,
    structuredOutput: o.structuredOutput ?? 'json_schema',
    maxAttempts: o.maxAttempts ?? 3,
    retryAfterCapMs: o.retryAfterCapMs ?? 60_000,
    backoffBaseMs,
    backoffMaxMs: Math.max(o.backoffMaxMs ?? 8_000, backoffBaseMs),
    streamIdleTimeoutMs: o.streamIdleTimeoutMs ?? 120_000,
    stream: o.stream ?? true,
    timeoutMs: o.timeoutMs ?? 600_000,
    headers: Object.freeze({ ...(o.headers ?? {}) }),
    provider: o.provider ?? (isOpenAI ? 'openai' : 'openai-compatible'),
    parallelToolCalls: o.parallelToolCalls,
    temperature: o.temperature,
    extraBody: Object.freeze({ ...(o.extraBody ?? {}) }),
    clock: o.clock,
    random: o.random ?? Math.random,
  });
}

function safeShow(value: unknown): string {
  try {
    const text = typeof value === 'string' ? JSON.stringify(value) : (JSON.stringify(value) ?? String(value));
    return text.length > 80 ? `${text.slice(0, 77)}...` : text;
  } catch {
    return String(value);
  }
}
