// The `fetch` the SDK is given: a small one over node:http(s).
//
// Why not the global fetch: aborting it while a TLS handshake is pending does
// not close the socket (undici cannot reach a connection before it is
// established; it stays open until the server gives up), so a cancelled call
// would leave a half-open connection behind. Here an abort destroys the
// request's socket in every phase — connecting, TLS, waiting for headers,
// reading the body — and the server sees it closed.
import http from 'node:http';
import https from 'node:https';
import { Readable } from 'node:stream';

/** What `fetch` rejects with when its signal aborts (named as fetch names it). */
function abortError(signal: AbortSignal | null | undefined): Error {
  const reason: unknown = signal?.reason;
  const error = new Error('This operation was aborted', reason === undefined ? undefined : { cause: reason });
  error.name = 'AbortError';
  return error;
}

function bodyOf(body: RequestInit['body']): string | Uint8Array | undefined {
  if (body === undefined || body === null) return undefined;
  if (typeof body === 'string' || body instanceof Uint8Array) return body;
  if (body instanceof ArrayBuffer) return new Uint8Array(body);
  throw new TypeError('this fetch sends string or byte bodies only');
}

/** A `fetch` on keep-alive agents of its own, whose abort closes the socket in any phase. */
export function nodeFetch(): (input: string | URL | Request, init?: RequestInit) => Promise<Response> {
  const agents = {
    http: new http.Agent({ keepAlive: true }),
    https: new https.Agent({ keepAlive: true }),
  };
  return (input, init = {}) =>
    new Promise<Response>((resolve, reject) => {
      const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
      const signal = init.signal ?? undefined;
      if (signal?.aborted) {
        reject(abortError(signal));
        return;
      }
      const secure = url.protocol === 'https:';
      const body = bodyOf(init.body);
      const headers: Record<string, string> = {};
      new Headers(init.headers).forEach((value, key) => {
        headers[key] = value;
      });
      if (body !== undefined) headers['content-length'] = String(Buffer.byteLength(body));
      const req = (secure ? https : http).request(url, {
        method: init.method ?? 'GET',
        headers,
        agent: secure ? agents.https : agents.http,
      });
      const onAbort = (): void => {
        const error = abortError(signal);
        req.destroy(error);
        reject(error);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      // `on`, not `once`: a socket can fail again after the first error (a reset after an abort),
      // and an 'error' nobody listens to would crash the process. Rejecting twice is harmless.
      req.on('error', (error) => {
        signal?.removeEventListener('abort', onAbort);
        reject(error);
      });
      req.once('response', (res) => {
        signal?.removeEventListener('abort', onAbort);
        // The body's errors reach the reader through the web stream; this keeps a late one from being uncaught.
        res.on('error', () => {});
        const onAbortBody = (): void => {
          res.destroy(abortError(signal));
        };
        signal?.addEventListener('abort', onAbortBody, { once: true });
        res.once('close', () => signal?.removeEventListener('abort', onAbortBody));
        const responseHeaders = new Headers();
        for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) {
          responseHeaders.append(res.rawHeaders[i] as string, res.rawHeaders[i + 1] as string);
        }
        const status = res.statusCode ?? 502;
        const empty = status === 204 || status === 304 || init.method === 'HEAD';
        if (empty) res.resume();
        resolve(
          new Response(empty ? null : (Readable.toWeb(res) as ReadableStream<Uint8Array>), {
            status,
            statusText: res.statusMessage ?? '',
            headers: responseHeaders,
          }),
        );
      });
      req.end(body);
    });
}
