// When to try a model call again, and how long to wait first. Pure functions.

/** Anything with a `get(name)` like `Headers`. */
export interface HeaderLookup {
  get(name: string): string | null;
}

/**
 * Retried statuses: 408 (request timeout), 409 (lock), 429 (rate limit) and
 * 5xx — unless the server says otherwise with `x-should-retry`.
 */
export function isRetryableStatus(status: number, headers: HeaderLookup | undefined): boolean {
  const should = headers?.get('x-should-retry');
  if (should === 'true') return true;
  if (should === 'false') return false;
  return status === 408 || status === 409 || status === 429 || status >= 500;
}

/**
 * How long the server asked to wait, in ms: `retry-after-ms` (ms), else
 * `retry-after` as seconds or as an HTTP date. `undefined` when absent or
 * unreadable; never negative.
 */
export function parseRetryAfter(headers: HeaderLookup | undefined, nowMs: number): number | undefined {
  if (headers === undefined) return undefined;
  const ms = headers.get('retry-after-ms');
  if (ms !== null && ms.trim() !== '') {
    const value = Number(ms);
    if (Number.isFinite(value)) return Math.max(0, value);
  }
  const after = headers.get('retry-after');
  if (after === null || after.trim() === '') return undefined;
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
