// When to try a model call again, and how long to wait first. Pure functions.
// (The same rules as @troupe/openai's, over the AI SDK's header records.)

/** Response headers as the AI SDK reports them (`APICallError.responseHeaders`: lower-case names). */
export type HeaderRecord = Readonly<Record<string, string | undefined>>;

const header = (headers: HeaderRecord | undefined, name: string): string | undefined => {
  if (headers === undefined) return undefined;
  const direct = headers[name];
  if (direct !== undefined) return direct;
  // A provider that kept the server's spelling: look the name up case-insensitively.
  for (const [key, value] of Object.entries(headers)) if (key.toLowerCase() === name) return value;
  return undefined;
};

/**
 * Retried statuses: 408 (request timeout), 409 (lock), 429 (rate limit) and
 * 5xx (Anthropic's 529 "overloaded" among them) — unless the server says
 * otherwise with `x-should-retry`.
 */
export function isRetryableStatus(status: number, headers: HeaderRecord | undefined): boolean {
  const should = header(headers, 'x-should-retry');
  if (should === 'true') return true;
  if (should === 'false') return false;
  return status === 408 || status === 409 || status === 429 || status >= 500;
}

/**
 * How long the server asked to wait, in ms: `retry-after-ms` (ms), else
 * `retry-after` as seconds or as an HTTP date. `undefined` when absent or
 * unreadable; never negative.
 */
export function parseRetryAfter(headers: HeaderRecord | undefined, nowMs: number): number | undefined {
  const ms = header(headers, 'retry-after-ms');
  if (ms !== undefined && ms.trim() !== '') {
    const value = Number(ms);
    if (Number.isFinite(value)) return Math.max(0, value);
  }
  const after = header(headers, 'retry-after');
  if (after === undefined || after.trim() === '') return undefined;
  const seconds = Number(after);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const date = Date.parse(after);
  return Number.isNaN(date) ? undefined : Math.max(0, date - nowMs);
}

/**
 * Full-jitter exponential backoff: a uniform draw in
 * `[0, min(maxMs, baseMs * 2^(retry - 1)))` for the `retry`th retry (1-based).
 */
export function backoffDelay(retry: number, baseMs: number, maxMs: number, random: () => number): number {
  const ceiling = Math.min(maxMs, baseMs * 2 ** Math.max(0, retry - 1));
  const r = random();
  return ceiling * (Number.isFinite(r) ? Math.min(Math.max(r, 0), 1) : 0);
}
