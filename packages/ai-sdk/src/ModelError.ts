import { type ErrorCode, TroupeError } from '@troupe/core';

/**
 * The codes a {@link ModelError} carries: the same as `@troupe/openai`'s, so
 * code that handles a model's failure need not know which package made it.
 *
 * @example
 * ```ts
 * const transient: ModelErrorCode[] = ['ERR_MODEL_RATE_LIMITED', 'ERR_MODEL_TIMEOUT', 'ERR_MODEL_CONNECTION']
 * const retryLater = (err: unknown) => err instanceof ModelError && transient.includes(err.code)
 * ```
 */
export type ModelErrorCode = Extract<
  ErrorCode,
  | 'ERR_MODEL'
  | 'ERR_MODEL_AUTH'
  | 'ERR_MODEL_BAD_REQUEST'
  | 'ERR_MODEL_RATE_LIMITED'
  | 'ERR_MODEL_TIMEOUT'
  | 'ERR_MODEL_CONNECTION'
  | 'ERR_MODEL_STREAM_IDLE'
>;

/**
 * What a {@link ModelError} says beyond its message.
 *
 * @example
 * ```ts
 * const details: ModelErrorDetails = { code: 'ERR_MODEL_RATE_LIMITED', status: 429, attempts: 3, retryAfterMs: 20_000 }
 * const err = new ModelError('rate limited past the retry budget: wait 20 s or lower the load', details)
 * ```
 */
export interface ModelErrorDetails {
  readonly code: ModelErrorCode;
  /** The HTTP status the provider's server answered with, when it answered. */
  readonly status?: number | undefined;
  /** Attempts the call made before giving up (1 when it was not retried). */
  readonly attempts: number;
  /** How long the server asked to wait (`retry-after` / `retry-after-ms`), in ms. */
  readonly retryAfterMs?: number | undefined;
  /** The provider's own error type or code (`rate_limit_error`, `overloaded_error`, `invalid_api_key`, ...). */
  readonly serverCode?: string | undefined;
  readonly cause?: unknown;
}

/**
 * A model call failed. One class for every way it fails; `code` says which:
 *
 * | code | when | retried? |
 * |---|---|---|
 * | `ERR_MODEL_AUTH` | 401, 403, or no API key: the provider refused the credentials | no |
 * | `ERR_MODEL_BAD_REQUEST` | other 4xx, a prompt or setting the provider cannot take | no |
 * | `ERR_MODEL_RATE_LIMITED` | 429 past the attempt budget, or `retry-after` over the cap | yes, within the budget |
 * | `ERR_MODEL_TIMEOUT` | 408, or an attempt overran `timeoutMs` | yes, within the budget |
 * | `ERR_MODEL_CONNECTION` | refused, reset, DNS, a stream cut short | yes, before the first delta |
 * | `ERR_MODEL_STREAM_IDLE` | a stream sent nothing for `streamIdleTimeoutMs` | no |
 * | `ERR_MODEL` | 409, 5xx (529 overloaded) past the budget; an error inside the stream | 409/5xx yes |
 *
 * The message is one line that says what failed and what to change. It has
 * the name and fields of `@troupe/openai`'s `ModelError`, so it crosses a
 * thread the same way (`encodeError`/`decodeError` in `@troupe/core` rebuild
 * it with its code and fields); recognise it by `code` with
 * `isTroupeError(err, 'ERR_MODEL_AUTH')`, not by `instanceof` alone.
 *
 * @example
 * ```ts
 * import { isTroupeError } from '@troupe/core'
 *
 * declare const model: AiSdkModel
 * try {
 *   await model.generate({ messages: [{ role: 'user', content: 'hi' }], tools: [], signal: AbortSignal.timeout(30_000) })
 * } catch (err) {
 *   if (isTroupeError(err, 'ERR_MODEL_RATE_LIMITED')) console.error(err.message, (err as ModelError).retryAfterMs)
 * }
 * ```
 */
export class ModelError extends TroupeError {
  override readonly name: string = 'ModelError';
  declare readonly code: ModelErrorCode;
  readonly status: number | undefined;
  readonly attempts: number;
  readonly retryAfterMs: number | undefined;
  readonly serverCode: string | undefined;

  constructor(message: string, details: ModelErrorDetails) {
    super(message, details.cause === undefined ? { code: details.code } : { code: details.code, cause: details.cause });
    this.status = details.status;
    this.attempts = details.attempts;
    this.retryAfterMs = details.retryAfterMs;
    this.serverCode = details.serverCode;
  }

  override toData(): Record<string, unknown> {
    const data: Record<string, unknown> = { attempts: this.attempts };
    if (this.status !== undefined) data.status = this.status;
    if (this.retryAfterMs !== undefined) data.retryAfterMs = this.retryAfterMs;
    if (this.serverCode !== undefined) data.serverCode = this.serverCode;
    return data;
  }
}
