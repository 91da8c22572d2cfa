import {
  APICallError,
  InvalidArgumentError,
  InvalidPromptError,
  LoadAPIKeyError,
  UnsupportedFunctionalityError,
} from '@ai-sdk/provider';
import { type HeaderRecord, isRetryableStatus } from './retryPolicy.js';

/** Why an attempt's own controller aborted it. */
export type AbortCause = 'cancel' | 'timeout' | 'idle';

/** What went wrong in one attempt, before it is decided whether to try again. */
export type AttemptFailure =
  | { readonly kind: 'cancel' }
  | { readonly kind: 'timeout' }
  | { readonly kind: 'idle' }
  | {
      readonly kind: 'status';
      readonly status: number;
      readonly retryable: boolean;
      readonly headers: HeaderRecord | undefined;
      /** What the server said. */
      readonly detail: string;
      readonly serverCode: string | undefined;
      readonly url: string | undefined;
      readonly cause: unknown;
    }
  | { readonly kind: 'connection'; readonly detail: string; readonly url: string | undefined; readonly cause: unknown }
  /** The provider found no API key (none given, none in its environment variable). */
  | { readonly kind: 'no-key'; readonly detail: string; readonly cause: unknown }
  /** The provider refused the call before sending it: a prompt or setting it cannot take. */
  | { readonly kind: 'request'; readonly detail: string; readonly cause: unknown }
  /** The stream itself failed: an error part from the provider (an error event, a chunk it could not read). */
  | {
      readonly kind: 'stream';
      readonly detail: string;
      readonly serverCode: string | undefined;
      readonly cause: unknown;
    }
  | { readonly kind: 'unknown'; readonly cause: unknown };

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null;
const oneLine = (s: string): string => s.replace(/\s+/g, ' ').trim();

/**
 * Classify what an attempt threw. `aborted` is the reason the attempt's own
 * controller fired with, if it fired: an abort is ours (cancel, timeout,
 * idle) whatever error the provider turned it into.
 */
export function classifyFailure(error: unknown, aborted: AbortCause | undefined): AttemptFailure {
  if (aborted !== undefined) return { kind: aborted };
  if (isRecord(error) && error.name === 'AbortError') return { kind: 'cancel' };
  if (APICallError.isInstance(error)) {
    // A 2xx whose body failed while it was read (the provider wraps the read's error): what failed is the read.
    if (typeof error.statusCode === 'number' && error.statusCode < 300 && error.cause !== undefined) {
      const read = classifyFailure(error.cause, undefined);
      return read.kind === 'unknown'
        ? { kind: 'stream', detail: oneLine(error.message), serverCode: undefined, cause: error }
        : read;
    }
    if (typeof error.statusCode === 'number') {
      return {
        kind: 'status',
        status: error.statusCode,
        retryable: isRetryableStatus(error.statusCode, error.responseHeaders),
        headers: error.responseHeaders,
        detail: oneLine(error.message === '' ? 'no body' : error.message),
        serverCode: serverCodeOf(error.data),
        url: error.url,
        cause: error,
      };
    }
    // No status: the request never got an answer (the provider wraps fetch's failure).
    return { kind: 'connection', detail: networkDetail(error), url: error.url, cause: error };
  }
  if (LoadAPIKeyError.isInstance(error)) return { kind: 'no-key', detail: oneLine(error.message), cause: error };
  if (
    InvalidPromptError.isInstance(error) ||
    UnsupportedFunctionalityError.isInstance(error) ||
    InvalidArgumentError.isInstance(error)
  ) {
    return { kind: 'request', detail: oneLine(error.message), cause: error };
  }
  // A body read cut short: `TypeError: terminated` from undici, `fetch failed`, a socket's code.
  const code = errorCode(error);
  if (
    (code !== undefined && NETWORK_CODE.test(code)) ||
    (error instanceof TypeError && (error.message === 'terminated' || error.message === 'fetch failed'))
  ) {
    return { kind: 'connection', detail: networkDetail(error), url: undefined, cause: error };
  }
  return { kind: 'unknown', cause: error };
}

/** An `error` part of the stream as a failure: what the provider's error event said. */
export function streamFailure(error: unknown): AttemptFailure {
  if (APICallError.isInstance(error) || error instanceof Error) {
    const classified = classifyFailure(error, undefined);
    if (classified.kind !== 'unknown') return classified;
    return { kind: 'stream', detail: oneLine(error.message), serverCode: undefined, cause: error };
  }
  // Providers pass the server's error object as they parsed it: `{ type, message }` (Anthropic),
  // `{ code, message }` (OpenAI), or `{ error: { ... } }`.
  const body = isRecord(error) && isRecord(error.error) ? error.error : error;
  const message = isRecord(body) && typeof body.message === 'string' ? body.message : safeJson(error);
  return { kind: 'stream', detail: oneLine(message), serverCode: serverCodeOf(error), cause: error };
}

const NETWORK_CODE = /^(E[A-Z]+|UND_ERR_\w+|ERR_STREAM_PREMATURE_CLOSE|HPE_\w+)$/;

/** Whether trying again may help (before the first delta only; the caller checks that). */
export function isRetryable(failure: AttemptFailure): boolean {
  switch (failure.kind) {
    case 'status':
      return failure.retryable;
    case 'connection':
    case 'timeout':
      return true;
    default:
      return false;
  }
}

/** The provider's own error type or code, from the body it parsed: `{ error: { type | code } }` or `{ type | code }`. */
function serverCodeOf(data: unknown): string | undefined {
  const body = isRecord(data) && isRecord(data.error) ? data.error : data;
  if (!isRecord(body)) return undefined;
  for (const key of ['code', 'type', 'status'] as const) {
    const value = body[key];
    if (typeof value === 'string' && value !== '' && value !== 'error') return value;
  }
  return undefined;
}

/** The most telling code or message in an error's cause chain (`ECONNREFUSED`, `ENOTFOUND`, ...). */
function networkDetail(error: unknown): string {
  const code = errorCode(error);
  if (code !== undefined) return code;
  let e: unknown = error;
  let last = '';
  for (let depth = 0; depth < 6 && e instanceof Error; depth++) {
    last = e.message;
    e = e.cause;
  }
  return oneLine(last === '' ? 'connection failed' : last);
}

function errorCode(error: unknown): string | undefined {
  let e: unknown = error;
  for (let depth = 0; depth < 6 && isRecord(e); depth++) {
    const code = e.code;
    if (typeof code === 'string' && code !== '') return code;
    const inner = e.errors;
    if (Array.isArray(inner)) {
      for (const sub of inner) {
        const subCode = errorCode(sub);
        if (subCode !== undefined) return subCode;
      }
    }
    e = e.cause;
  }
  return undefined;
}

function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}
