// The daemon's HTTP plumbing: bodies, replies, errors as status codes, and a
// signal that aborts when the client goes away. node:http only.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { type ErrorCode, isTroupeError } from '@troupe/core';
import type { AgentReply } from '@troupe/supervisor';

const MAX_BODY_BYTES = 64 * 1024;

/** A request the daemon refuses, with the HTTP status and the message that says what to send instead. */
export class HttpError extends Error {
  override readonly name = 'HttpError';
  constructor(
    readonly status: number,
    message: string,
    readonly code?: string,
  ) {
    super(message);
  }
}

/** The JSON object of a request's body (at most 64 KiB). */
export async function readJson(req: IncomingMessage, shape: string): Promise<Record<string, unknown>> {
  let size = 0;
  const chunks: Buffer[] = [];
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new HttpError(413, `the body is over ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk as Buffer);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch (error) {
    throw new HttpError(400, `send JSON ${shape}: ${(error as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new HttpError(400, `send a JSON object ${shape}`);
  }
  return parsed as Record<string, unknown>;
}

/** Write a JSON reply, unless the client has gone (nobody would read it). */
export function reply(res: ServerResponse, status: number, body: unknown, closing: boolean): void {
  if (res.destroyed || res.headersSent) return;
  res.writeHead(status, {
    'content-type': 'application/json',
    // During shutdown, no keep-alive: the server can only close once its sockets have. After a 413
    // the body's unread rest is still on the socket, which is closed: the client must not reuse it.
    ...(closing || status === 413 ? { connection: 'close' } : {}),
  });
  res.end(`${JSON.stringify(body)}\n`);
}

/**
 * A signal that aborts when the client disconnects before its reply was
 * written: passed to `send`/`resume`, it cancels the message's whole run tree.
 */
export function clientGone(res: ServerResponse, onGone: () => void): AbortSignal {
  const controller = new AbortController();
  const gone = (): void => {
    if (res.writableFinished || controller.signal.aborted) return;
    onGone();
    controller.abort();
  };
  // Gone already (while the conversation was being restored): now, not never.
  if (res.closed) gone();
  else res.once('close', gone);
  return controller.signal;
}

// How the library's error codes read as HTTP statuses (anything else: 400, the caller's input).
const STATUS: Partial<Record<ErrorCode, number>> = {
  ERR_CLOSED: 503,
  ERR_BACKPRESSURE: 429,
  ERR_UNKNOWN_REQUEST: 404,
  ERR_REQUEST_ALREADY_ANSWERED: 409,
  ERR_INTERRUPTED: 409,
  ERR_AGENT_STOPPED: 409,
  ERR_AGENT_SUSPENDED: 409,
  ERR_STORE_WRITE: 503,
  ERR_STORE_LOCKED: 503,
  ERR_STORE_FENCED: 409,
  ERR_CONVERSATION_BUSY: 409,
  ERR_STORE_CORRUPT: 500,
  ERR_INTERNAL: 500,
};

/** The status and body of an error, or `undefined` when it is not one the daemon reports (a defect). */
export function errorReply(error: unknown): { status: number; body: Record<string, unknown> } | undefined {
  if (error instanceof HttpError) {
    return { status: error.status, body: { error: error.message, ...(error.code ? { code: error.code } : {}) } };
  }
  if (isTroupeError(error)) {
    return { status: STATUS[error.code] ?? 400, body: { error: error.message, code: error.code } };
  }
  return undefined;
}

/** An agent's reply as JSON: an `Error` becomes its message and code. */
export function replyJson(r: AgentReply): Record<string, unknown> {
  if (r.status !== 'failed') return { ...r };
  return { ...r, error: { message: r.error.message, code: (r.error as { code?: unknown }).code } };
}
