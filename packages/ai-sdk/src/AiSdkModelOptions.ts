import type { SharedV4ProviderOptions } from '@ai-sdk/provider';
import { type Clock, InvalidArgumentError } from '@troupe/core';
import { z } from 'zod';

/**
 * How {@link aiSdkModel} calls its model. Every option may be left out.
 *
 * The provider itself (its API key, base URL, `fetch`) is configured where
 * the model is made, with the provider package's own factory
 * (`createAnthropic({ apiKey })('claude-sonnet-4-5')`).
 *
 * @example
 * ```ts
 * const options: AiSdkModelOptions = {
 *   maxAttempts: 2,
 *   maxOutputTokens: 1024,
 *   providerOptions: { anthropic: { thinking: { type: 'enabled', budgetTokens: 2048 } } },
 * }
 * ```
 */
export interface AiSdkModelOptions {
  /** Attempts per call, the first included (default 3). Retries never happen after the first delta. */
  readonly maxAttempts?: number | undefined;
  /** The longest `retry-after` that is waited for (default 60 s); a longer one fails the call at once. */
  readonly retryAfterCapMs?: number | undefined;
  /** Backoff before the first retry, doubled for each next one, with full jitter (default 500 ms). */
  readonly backoffBaseMs?: number | undefined;
  /** The longest backoff (default 8 s). */
  readonly backoffMaxMs?: number | undefined;
  /** A stream that sends no part for this long is aborted (default 120 s). */
  readonly streamIdleTimeoutMs?: number | undefined;
  /**
   * Per attempt: until the provider's stream opens (its response headers),
   * or the whole answer when not streaming (default 600 s). An attempt that
   * overruns is retried; the last one fails with `ERR_MODEL_TIMEOUT`.
   */
  readonly timeoutMs?: number | undefined;
  /** Stream the answer (`doStream`, default `true`); `false` asks for it whole (`doGenerate`). */
  readonly stream?: boolean | undefined;
  /** Longest answer, in tokens; the provider's default when unset. */
  readonly maxOutputTokens?: number | undefined;
  /** Sampling temperature; the provider's default when unset. */
  readonly temperature?: number | undefined;
  readonly topP?: number | undefined;
  readonly topK?: number | undefined;
  readonly seed?: number | undefined;
  readonly stopSequences?: readonly string[] | undefined;
  /** How much the model reasons, where the provider supports it (`'low'`, `'high'`, ...). */
  readonly reasoning?:
    | 'provider-default'
    | 'none'
    | 'minimal'
    | 'low'
    | 'medium'
    | 'high'
    | 'xhigh'
    | 'max'
    | undefined;
  /** Whether the model must call a tool: `auto` (default), `none` or `required`. */
  readonly toolChoice?: 'auto' | 'none' | 'required' | undefined;
  /**
   * How an agent's structured `output` is asked for: `response_format` (the
   * default) passes its JSON schema as the provider's `responseFormat`, which
   * providers that support it enforce (natively, or with a JSON tool of their
   * own); `none` sends no schema (the instructions must ask for the JSON). The
   * agent loop checks the answer against the schema either way.
   */
  readonly structuredOutput?: 'response_format' | 'none' | undefined;
  /** Provider-specific settings, by provider (`{ anthropic: { thinking: ... } }`), passed as they are. */
  readonly providerOptions?: SharedV4ProviderOptions | undefined;
  /** Extra HTTP headers on every request. */
  readonly headers?: Readonly<Record<string, string>> | undefined;
  /** Who serves the model, for telemetry (default: the provider's own name, e.g. `anthropic.messages`). */
  readonly provider?: string | undefined;
  /** Where time comes from (timers of the backoff, timeout and idle watch). For tests. */
  readonly clock?: Clock | undefined;
  /** A uniform draw in [0, 1) for the backoff jitter (default `Math.random`). For tests. */
  readonly random?: (() => number) | undefined;
}

/**
 * {@link AiSdkModelOptions} validated and defaulted.
 *
 * @example
 * ```ts
 * const resolved: ResolvedAiSdkModelOptions = resolveAiSdkModelOptions({ maxAttempts: 1 })
 * resolved.stream     // true
 * resolved.timeoutMs  // 600000
 * ```
 */
export interface ResolvedAiSdkModelOptions {
  readonly maxAttempts: number;
  readonly retryAfterCapMs: number;
  readonly backoffBaseMs: number;
  readonly backoffMaxMs: number;
  readonly streamIdleTimeoutMs: number;
  readonly timeoutMs: number;
  readonly stream: boolean;
  readonly maxOutputTokens: number | undefined;
  readonly temperature: number | undefined;
  readonly topP: number | undefined;
  readonly topK: number | undefined;
  readonly seed: number | undefined;
  readonly stopSequences: readonly string[] | undefined;
  readonly reasoning: AiSdkModelOptions['reasoning'];
  readonly toolChoice: 'auto' | 'none' | 'required' | undefined;
  readonly structuredOutput: 'response_format' | 'none';
  readonly providerOptions: SharedV4ProviderOptions | undefined;
  readonly headers: Readonly<Record<string, string>>;
  readonly provider: string | undefined;
  readonly clock: Clock | undefined;
  readonly random: () => number;
}

// The longest a timer can wait in Node (2^31 - 1 ms, ~24.8 days).
const MAX_TIMER_MS = 2_147_483_647;
const ms = (min = 1) => z.number().int().min(min).max(MAX_TIMER_MS).optional();

const Schema = z.strictObject({
  maxAttempts: z.number().int().min(1).max(20).optional(),
  retryAfterCapMs: ms(0),
  backoffBaseMs: ms(0),
  backoffMaxMs: ms(),
  streamIdleTimeoutMs: ms(),
  timeoutMs: ms(),
  stream: z.boolean().optional(),
  maxOutputTokens: z.number().int().min(1).optional(),
  temperature: z.number().finite().min(0).optional(),
  topP: z.number().finite().min(0).max(1).optional(),
  topK: z.number().int().min(1).optional(),
  seed: z.number().int().optional(),
  stopSequences: z.array(z.string().min(1)).optional(),
  reasoning: z.enum(['provider-default', 'none', 'minimal', 'low', 'medium', 'high', 'xhigh', 'max']).optional(),
  toolChoice: z.enum(['auto', 'none', 'required']).optional(),
  structuredOutput: z.enum(['response_format', 'none']).optional(),
  providerOptions: z.record(z.string(), z.record(z.string(), z.unknown())).optional(),
  headers: z.record(z.string(), z.string()).optional(),
  provider: z.string().min(1).optional(),
  clock: z
    .custom<Clock>((v) => typeof v === 'object' && v !== null && typeof (v as Clock).setTimeout === 'function')
    .optional(),
  random: z.custom<() => number>((v) => typeof v === 'function').optional(),
});

const WHOLE_MS = 'pass a whole number of milliseconds from 1 to 2147483647';
const HINTS: Record<string, string> = {
  maxAttempts: 'pass an integer from 1 (no retries) to 20',
  retryAfterCapMs: 'pass a whole number of milliseconds from 0 (never wait) to 2147483647',
  backoffBaseMs: 'pass a whole number of milliseconds from 0 to 2147483647',
  backoffMaxMs: WHOLE_MS,
  streamIdleTimeoutMs: WHOLE_MS,
  timeoutMs: WHOLE_MS,
  maxOutputTokens: 'pass a whole number of tokens, at least 1',
  temperature: 'pass a number from 0 (the range above depends on the provider)',
  topP: 'pass a number from 0 to 1',
  topK: 'pass an integer from 1',
  reasoning: "pass 'provider-default', 'none', 'minimal', 'low', 'medium', 'high', 'xhigh' or 'max'",
  toolChoice: "pass 'auto', 'none' or 'required'",
  structuredOutput: "pass 'response_format' (the agent's output schema as the provider's responseFormat) or 'none'",
  providerOptions: 'pass an object of objects keyed by provider, e.g. { anthropic: { thinking: { ... } } }',
};

/**
 * Validate options once, at the edge, into a fully defaulted object. A bad
 * option throws an `InvalidArgumentError` naming it and what to pass.
 * `aiSdkModel` calls it; call it yourself to check a configuration early.
 *
 * @example
 * ```ts
 * const options = resolveAiSdkModelOptions({ maxOutputTokens: 512 })
 * options.maxAttempts // 3
 * ```
 */
export function resolveAiSdkModelOptions(options: AiSdkModelOptions = {}): ResolvedAiSdkModelOptions {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidArgumentError('aiSdkModel: options must be an object, e.g. aiSdkModel(model, { maxAttempts: 2 })');
  }
  // `undefined` means "not given" for every option (callers spread partial configs).
  const given = Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined));
  const parsed = Schema.safeParse(given);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const key = String(issue?.path[0] ?? '');
    // Headers are where gateways take keys: never repeated.
    const shown = key === 'headers' ? '(hidden)' : safeShow((given as Record<string, unknown>)[key]);
    const what = issue?.code === 'unrecognized_keys' ? `unknown option ${issue.keys.join(', ')}` : `${key} is invalid`;
    const hint =
      issue?.code === 'unrecognized_keys'
        ? "configure the provider (API key, base URL) with its own factory, e.g. createAnthropic({ apiKey })('claude-sonnet-4-5')"
        : (HINTS[key] ?? issue?.message ?? '');
    throw new InvalidArgumentError(
      `aiSdkModel: ${what}${issue?.code === 'unrecognized_keys' ? '' : ` (got ${shown})`}: ${hint}`,
    );
  }
  const o = parsed.data;
  const backoffBaseMs = o.backoffBaseMs ?? 500;
  return Object.freeze({
    maxAttempts: o.maxAttempts ?? 3,
    retryAfterCapMs: o.retryAfterCapMs ?? 60_000,
    backoffBaseMs,
    backoffMaxMs: Math.max(o.backoffMaxMs ?? 8_000, backoffBaseMs),
    streamIdleTimeoutMs: o.streamIdleTimeoutMs ?? 120_000,
    timeoutMs: o.timeoutMs ?? 600_000,
    stream: o.stream ?? true,
    maxOutputTokens: o.maxOutputTokens,
    temperature: o.temperature,
    topP: o.topP,
    topK: o.topK,
    seed: o.seed,
    stopSequences: o.stopSequences === undefined ? undefined : Object.freeze([...o.stopSequences]),
    reasoning: o.reasoning,
    toolChoice: o.toolChoice,
    structuredOutput: o.structuredOutput ?? 'response_format',
    providerOptions: o.providerOptions as SharedV4ProviderOptions | undefined,
    headers: Object.freeze({ ...(o.headers ?? {}) }),
    provider: o.provider,
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
