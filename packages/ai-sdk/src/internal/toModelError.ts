import { ModelError } from '../ModelError.js';
import type { AttemptFailure } from './AttemptFailure.js';

/** What the message of a failed call names. */
export interface FailureContext {
  /** The provider's name (`anthropic.messages`) and the model's id. */
  readonly provider: string;
  readonly modelId: string;
  readonly attempts: number;
  readonly timeoutMs: number;
  readonly streamIdleTimeoutMs: number;
  /** The provider had started answering (its stream opened): a cut is not "cannot reach". */
  readonly answering: boolean;
  /** What the last answer's `retry-after(-ms)` asked for, if it said. */
  readonly retryAfterMs?: number | undefined;
}

/** The longest server text a message quotes (a proxy's 502 page is not a message). */
const MAX_DETAIL = 300;

const quoted = (detail: string): string =>
  detail.length > MAX_DETAIL ? `${detail.slice(0, MAX_DETAIL)}… (${detail.length} characters)` : detail;

const times = (n: number): string => (n === 1 ? '1 attempt' : `${n} attempts`);

/** A duration for people: `250 ms`, `42 s`, `3.5 h`, `12 days`. */
export function formatDuration(ms: number): string {
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  if (ms < 120_000) return `${Math.round(ms / 100) / 10} s`;
  if (ms < 7_200_000) return `${Math.round(ms / 6_000) / 10} min`;
  if (ms < 172_800_000) return `${Math.round(ms / 360_000) / 10} h`;
  return `${Math.round(ms / 8_640_000) / 10} days`;
}

/** The request's URL as a message shows it: no query (where some providers take keys), no credentials. */
function shownURL(url: string | undefined): string | undefined {
  if (url === undefined) return undefined;
  try {
    const u = new URL(url);
    u.username = '';
    u.password = '';
    u.search = '';
    return u.toString();
  } catch {
    return undefined;
  }
}

/**
 * The one-line error a failed call ends with: what failed, where, after how
 * many attempts, and what to change. Cancellation is not a `ModelError`:
 * the caller turns `cancel` into a `CancelledError` before it gets here.
 */
export function toModelError(failure: Exclude<AttemptFailure, { kind: 'cancel' }>, ctx: FailureContext): ModelError {
  const url = 'url' in failure ? shownURL(failure.url) : undefined;
  const at = `${ctx.provider} (model "${ctx.modelId}"${url === undefined ? '' : ` at ${url}`})`;
  const after = times(ctx.attempts);
  const base = { attempts: ctx.attempts };
  switch (failure.kind) {
    case 'timeout':
      return new ModelError(
        `${at} did not answer within ${formatDuration(ctx.timeoutMs)} (${after}): raise timeoutMs or check that the provider is not overloaded`,
        { ...base, code: 'ERR_MODEL_TIMEOUT' },
      );
    case 'idle':
      return new ModelError(
        `the stream from ${at} sent nothing for ${formatDuration(ctx.streamIdleTimeoutMs)}: the provider stalled (raise streamIdleTimeoutMs for a model that pauses longer)`,
        { ...base, code: 'ERR_MODEL_STREAM_IDLE' },
      );
    case 'connection':
      return ctx.answering
        ? new ModelError(`${at} cut the answer short (${quoted(failure.detail)}): try again`, {
            ...base,
            code: 'ERR_MODEL_CONNECTION',
            cause: failure.cause,
          })
        : new ModelError(
            /ENOTFOUND|EAI_AGAIN/.test(failure.detail)
              ? `cannot resolve the host of ${at} (${failure.detail}, ${after}): check the provider's base URL`
              : `cannot reach ${at} (${quoted(failure.detail)}, ${after}): check the provider's base URL and the network`,
            { ...base, code: 'ERR_MODEL_CONNECTION', cause: failure.cause },
          );
    case 'no-key':
      return new ModelError(
        `${ctx.provider} has no API key (${quoted(failure.detail)}): pass apiKey to the provider's factory or set its environment variable in the process (workers copy the environment when they start)`,
        { ...base, code: 'ERR_MODEL_AUTH', cause: failure.cause },
      );
    case 'request':
      return new ModelError(`${at} cannot take this call: ${quoted(failure.detail)}; it is not retried`, {
        ...base,
        code: 'ERR_MODEL_BAD_REQUEST',
        cause: failure.cause,
      });
    case 'stream':
      return new ModelError(`${at} failed inside the stream: ${quoted(failure.detail)}`, {
        ...base,
        code: 'ERR_MODEL',
        serverCode: failure.serverCode,
        cause: failure.cause,
      });
    case 'unknown': {
      const message = failure.cause instanceof Error ? failure.cause.message : String(failure.cause);
      return new ModelError(`the model call to ${at} failed: ${quoted(message.replace(/\s+/g, ' '))}`, {
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
  const said = `${status}: ${quoted(detail)}`;
  if (status === 401 || status === 403) {
    return new ModelError(
      `${at} refused the credentials (${said}): check the API key given to the provider (or its environment variable)`,
      { ...fields, code: 'ERR_MODEL_AUTH' },
    );
  }
  if (status === 404) {
    return new ModelError(`${at} was not found (${said}): check the model id and the provider's base URL`, {
      ...fields,
      code: 'ERR_MODEL_BAD_REQUEST',
    });
  }
  if (status === 429) {
    return new ModelError(`${at} rate limited the call (${said}; ${after}): wait, or lower the request rate`, {
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
  return new ModelError(`${at} failed (${said}; ${after}): try again later`, { ...fields, code: 'ERR_MODEL' });
}

/** The server asked to wait longer than the cap: give up at once. */
export function overCapError(
  failure: Extract<AttemptFailure, { kind: 'status' }>,
  retryAfterMs: number,
  capMs: number,
  ctx: FailureContext,
): ModelError {
  return new ModelError(
    `${ctx.provider} (model "${ctx.modelId}") asked to wait ${formatDuration(retryAfterMs)} before retrying (${failure.status}: ${quoted(failure.detail)}), over the ${formatDuration(capMs)} cap: try again later or raise retryAfterCapMs`,
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
