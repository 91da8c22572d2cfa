import { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from 'openai';
import { type HeaderLookup, isRetryableStatus } from './retryPolicy.js';

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
      readonly headers: HeaderLookup | undefined;
      /** What the server said, without the status prefix the SDK adds. */
      readonly detail: string;
      readonly serverCode: string | undefined;
      readonly cause: unknown;
    }
  | { readonly kind: 'connection'; readonly detail: string; readonly cause: unknown }
  /** The stream itself failed: an error event from the server (`server`), or data that is not JSON (`data`). */
  | { readonly kind: 'stream'; readonly source: 'server' | 'data'; readonly detail: string; readonly cause: unknown }
  /** A call not streamed got an answer that is not JSON (not an OpenAI-compatible endpoint). */
  | { readonly kind: 'body'; readonly detail: string; readonly cause: unknown }
  | { readonly kind: 'unknown'; readonly cause: unknown };

/**
 * Classify what an attempt threw. `aborted` is the reason the attempt's own
 * controller fired with, if it fired: an abort is ours (cancel, timeout,
 * idle) whatever error the SDK turned it into.
 */
export function classifyFailure(error: unknown, aborted: AbortCause | undefined, streamed = true): AttemptFailure {
  if (aborted !== undefined) return { kind: aborted };
  if (error instanceof APIUserAbortError) return { kind: 'cancel' };
  if (error instanceof APIConnectionTimeoutError) return { kind: 'timeout' };
  if (error instanceof APIConnectionError) return { kind: 'connection', detail: networkDetail(error), cause: error };
  if (error instanceof APIError) {
    if (typeof error.status === 'number') {
      return {
        kind: 'status',
        status: error.status,
        retryable: isRetryableStatus(error.status, error.headers),
        headers: error.headers,
        detail: serverMessage(error),
        serverCode: typeof error.code === 'string' ? error.code : undefined,
        cause: error,
      };
    }
    return { kind: 'stream', source: 'server', detail: serverMessage(error), cause: error };
  }
  if (error instanceof SyntaxError) {
    return streamed
      ? { kind: 'stream', source: 'data', detail: `an event that is not JSON (${error.message})`, cause: error }
      : { kind: 'body', detail: `its answer is not JSON (${error.message})`, cause: error };
  }
  // A body read cut short: `Error: aborted` (ECONNRESET) from node:http, `TypeError: terminated` from undici.
  const code = errorCode(error);
  if (
    (code !== undefined && NETWORK_CODE.test(code)) ||
    (error instanceof TypeError && error.message === 'terminated')
  ) {
    return { kind: 'connection', detail: networkDetail(error), cause: error };
  }
  return { kind: 'unknown', cause: error };
}

const NETWORK_CODE = /^(E[A-Z]+|UND_ERR_\w+|ERR_STREAM_PREMATURE_CLOSE|HPE_\w+)$/;

/** Whether trying again may help (before the first token only; the caller checks that). */
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

function serverMessage(error: APIError): string {
  const body = error.error as { message?: unknown } | undefined;
  if (body !== undefined && typeof body.message === 'string' && body.message !== '') return oneLine(body.message);
  const message = error.message.replace(/^\d{3}\s+/, '');
  return oneLine(message === '' ? 'no body' : message);
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
  for (let depth = 0; depth < 6 && typeof e === 'object' && e !== null; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && code !== '') return code;
    const inner = (e as { errors?: unknown }).errors;
    if (Array.isArray(inner)) {
      for (const sub of inner) {
        const subCode = errorCode(sub);
        if (subCode !== undefined) return subCode;
      }
    }
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

const oneLine = (s: string): string => s.replace(/\s+/g, ' ').trim();
