import { ModelError } from '../ModelError.js';
import type { AttemptFailure } from './AttemptFailure.js';

/** What the message of a failed call names. */
export interface FailureContext {
  readonly baseURL: string;
  readonly model: string;
  readonly attempts: number;
  readonly timeoutMs: number;
  readonly streamIdleTimeoutMs: number;
  /** The server had started answering (headers or deltas): a cut is not "cannot reach". */
  readonly answering: boolean;
  /** What the last answer's `retry-after(-ms)` asked for, if it said. */
  readonly retryAfterMs?: number | undefined;
  /** The call's attempt budget (`maxAttempts`). */
  readonly maxAttempts?: number | undefined;
  /** What no message may repeat: the API key, the base URL's user and password. */
  readonly secrets?: readonly string[] | undefined;
}

/** The longest server text a message quotes (a proxy's 502 page is not a message). */
const MAX_DETAIL = 300;

/** `baseURL` as a message shows it: without the user and password it may carry. */
export function displayURL(baseURL: string): string {
  try {
    const url = new URL(baseURL);
    if (url.username === '' && url.password === '') return baseURL;
    url.username = '';
    url.password = '';
    return url.toString();
  } catch {
    return baseURL;
  }
}

/** The secrets a failure's message must not repeat, from the key and the base URL. */
export function secretsOf(
  apiKey: string | undefined,
  baseURL: string,
  headers: Readonly<Record<string, string>> = {},
): string[] {
  const out: string[] = [];
  if (apiKey !== undefined && apiKey.length >= 4) out.push(apiKey);
  // Extra headers are where gateways and Azure take keys (`api-key`, `x-api-key`, a bearer token).
  for (const value of Object.values(headers)) {
    if (value.length < 8) continue;
    out.push(value);
    const bearer = /^(?:bearer|basic|token)\s+(.+)$/i.exec(value)?.[1];
    if (bearer !== undefined && bearer.length >= 4) out.push(bearer);
  }
  try {
    const url = new URL(baseURL);
    for (const part of [url.password, url.username]) {
      if (part.length === 0) continue;
      out.push(part);
      const decoded = decodeURIComponent(part);
      if (decoded !== part) out.push(decoded);
    }
  } catch {
    // Not a URL: nothing in it to hide (the options check refuses it before a call).
  }
  return out;
}

function redact(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const secret of secrets) if (secret.length > 0) out = out.split(secret).join('[redacted]');
  return out;
}

/** What the server said, as a message may quote it: secrets redacted, one short line. */
function quoted(detail: string, secrets: readonly string[]): string {
  const clean = redact(detail, secrets);
  return clean.length > MAX_DETAIL ? `${clean.slice(0, MAX_DETAIL)}… (${clean.length} characters)` : clean;
}

/**
 * The SDK's error as a cause, unless it repeats a secret (a server echoing the key in its body):
 * then an Error of the same name and status with the redacted message, and nothing else of it.
 */
function safeCause(cause: unknown, secrets: readonly string[]): unknown {
  if (secrets.length === 0 || !(cause instanceof Error)) return cause;
  let seen: string;
  try {
    seen = `${cause.message} ${JSON.stringify(cause)}`;
  } catch {
    seen = cause.message;
  }
  if (!secrets.some((s) => s.length > 0 && seen.includes(s))) return cause;
  const copy = new Error(quoted(cause.message, secrets));
  copy.name = cause.name;
  const status = (cause as { status?: unknown }).status;
  if (typeof status === 'number') (copy as Error & { status?: number }).status = status;
  return copy;
}

/** The failure with what its message quotes made safe to show: secrets out, the server's text short. */
function shown<F extends Exclude<AttemptFailure, { kind: 'cancel' }>>(failure: F, secrets: readonly string[]): F {
  if (!('detail' in failure)) return failure;
  return { ...failure, detail: quoted(failure.detail, secrets), cause: safeCause(failure.cause, secrets) };
}

const times = (n: number): string => (n === 1 ? '1 attempt' : `${n} attempts`);

/** A duration for people: `250 ms`, `42 s`, `3.5 h`, `12 days`. */
export function formatDuration(ms: number): string {
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  if (ms < 120_000) return `${Math.round(ms / 100) / 10} s`;
  if (ms < 7_200_000) return `${Math.round(ms / 6_000) / 10} min`;
  if (ms < 172_800_000) return `${Math.round(ms / 360_000) / 10} h`;
  return `${Math.round(ms / 8_640_000) / 10} days`;
}

/**
 * The one-line error a failed call ends with: what failed, where, after how
 * many attempts, and what to change. Cancellation is not a `ModelError`:
 * the caller turns `cancel` into a `CancelledError` before it gets here.
 */
export function toModelError(
  unsafe: Exclude<AttemptFailure, { kind: 'cancel' }>,
  unsafeCtx: FailureContext,
): ModelError {
  const failure = shown(unsafe, unsafeCtx.secrets ?? []);
  const ctx = { ...unsafeCtx, baseURL: displayURL(unsafeCtx.baseURL) };
  const at = `the model server at ${ctx.baseURL}`;
  const after = times(ctx.attempts);
  const base = { attempts: ctx.attempts };
  switch (failure.kind) {
    case 'timeout':
      return new ModelError(
        `${at} did not answer within ${formatDuration(ctx.timeoutMs)} (${after}): raise timeoutMs or check that the server is not overloaded`,
        { ...base, code: 'ERR_MODEL_TIMEOUT' },
      );
    case 'idle':
      return new ModelError(
        `the stream from ${ctx.baseURL} sent nothing for ${formatDuration(ctx.streamIdleTimeoutMs)}: the server stalled (raise streamIdleTimeoutMs for a model that pauses longer)`,
        { ...base, code: 'ERR_MODEL_STREAM_IDLE' },
      );
    case 'connection':
      return ctx.answering
        ? new ModelError(`${at} cut the answer short (${failure.detail}): try again`, {
            ...base,
            code: 'ERR_MODEL_CONNECTION',
            cause: failure.cause,
          })
        : new ModelError(
            failure.detail === 'ENOTFOUND' || failure.detail === 'EAI_AGAIN'
              ? `cannot resolve the host of ${ctx.baseURL} (${failure.detail}, ${after}): check baseURL`
              : `cannot reach ${at} (${failure.detail}, ${after}): check baseURL and that the server is running`,
            { ...base, code: 'ERR_MODEL_CONNECTION', cause: failure.cause },
          );
    case 'stream':
      // An error inside a stream is never retried: the server may have begun its answer.
      return failure.source === 'server'
        ? new ModelError(
            `${at} failed inside the stream: ${failure.detail} (not retried: the answer had begun): send the message again; if the error names the request (the model, the context length, a parameter), fix that first`,
            { ...base, code: 'ERR_MODEL', cause: failure.cause },
          )
        : new ModelError(
            `${at} sent ${failure.detail} inside the stream: check that baseURL is an OpenAI-compatible endpoint (usually ending in /v1) and that no proxy rewrites its event stream`,
            { ...base, code: 'ERR_MODEL', cause: failure.cause },
          );
    case 'body':
      return new ModelError(
        `${at} sent an answer that is not a chat completion: ${failure.detail}; check baseURL (an OpenAI-compatible endpoint, usually ending in /v1)`,
        { ...base, code: 'ERR_MODEL', cause: failure.cause },
      );
    case 'unknown': {
      const message = failure.cause instanceof Error ? failure.cause.message : String(failure.cause);
      return new ModelError(`the model call failed: ${message.replace(/\s+/g, ' ')}`, {
        ...base,
        code: 'ERR_MODEL',
        cause: failure.cause,
      });
    }
    case 'status':
      return statusError(failure, ctx, at, after);
  }
}

function statusError(
  failure: Extract<AttemptFailure, { kind: 'status' }>,
  ctx: FailureContext,
  at: string,
  after: string,
): ModelError {
  const { status, detail, serverCode, cause } = failure;
  const fields = { attempts: ctx.attempts, status, serverCode, cause, retryAfterMs: ctx.retryAfterMs };
  const said = `${status}: ${detail}`;
  // What the server asked the last attempt to wait, when it said: the time to try again after.
  const asked = ctx.retryAfterMs === undefined ? '' : `; it asked to wait ${formatDuration(ctx.retryAfterMs)}`;
  if (status === 401 || status === 403) {
    return new ModelError(`${at} refused the credentials (${said}): check apiKey (or OPENAI_API_KEY)`, {
      ...fields,
      code: 'ERR_MODEL_AUTH',
    });
  }
  if (status === 404) {
    return new ModelError(
      `${at} has no chat completions for model "${ctx.model}" (${said}): check baseURL (it usually ends in /v1) and the model name`,
      { ...fields, code: 'ERR_MODEL_BAD_REQUEST' },
    );
  }
  if (status === 429) {
    return new ModelError(`${at} rate limited the call (${said}; ${after}${asked}): wait, or lower the request rate`, {
      ...fields,
      code: 'ERR_MODEL_RATE_LIMITED',
    });
  }
  if (status === 408) {
    return new ModelError(`${at} timed out the request (${said}; ${after}): try again later`, {
      ...fields,
      code: 'ERR_MODEL_TIMEOUT',
    });
  }
  if (status >= 400 && status < 500 && !failure.retryable) {
    return new ModelError(`${at} refused the request (${said}): fix the request; it is not retried`, {
      ...fields,
      code: 'ERR_MODEL_BAD_REQUEST',
    });
  }
  return new ModelError(`${at} failed (${said}; ${after}${asked}): try again later`, { ...fields, code: 'ERR_MODEL' });
}

/** The server asked to wait longer than the cap: give up at once. */
export function overCapError(
  unsafe: Extract<AttemptFailure, { kind: 'status' }>,
  retryAfterMs: number,
  capMs: number,
  ctx: FailureContext,
): ModelError {
  const failure = shown(unsafe, ctx.secrets ?? []);
  // With no attempt left (maxAttempts: 1), a higher cap alone would not make the call wait.
  const raise =
    ctx.maxAttempts !== undefined && ctx.attempts >= ctx.maxAttempts
      ? `raise retryAfterCapMs and maxAttempts (${ctx.maxAttempts})`
      : 'raise retryAfterCapMs';
  return new ModelError(
    `the model server at ${displayURL(ctx.baseURL)} asked to wait ${formatDuration(retryAfterMs)} before retrying (${failure.status}: ${failure.detail}; ${times(ctx.attempts)}), over the ${formatDuration(capMs)} cap: try again later or ${raise}`,
    {
      code: 'ERR_MODEL_RATE_LIMITED',
      attempts: ctx.attempts,
      status: failure.status,
      retryAfterMs,
      serverCode: failure.serverCode,
      cause: failure.cause,
    },
  );
}
