import { InvalidArgumentError } from '@troupe/core';
import type { RedisOptions } from 'ioredis';
import { z } from 'zod';

// The longest a timer can wait in Node (2^31 - 1 ms, ~24.8 days).
export const MAX_TIMER_MS = 2_147_483_647;

/** Milliseconds from `min` to a timer's longest wait. */
export const ms = (min = 1) => z.number().int().min(min).max(MAX_TIMER_MS).optional();

/** Names that become parts of Redis keys and channels. */
export const NAME = /^[A-Za-z0-9._-]{1,64}$/;

/** What `connection` accepts: a `redis://` or `rediss://` URL, or ioredis options. */
export const Connection = z.union([
  z.string().regex(/^rediss?:\/\//),
  z.custom<RedisOptions>((v) => typeof v === 'object' && v !== null && !Array.isArray(v)),
]);

/** The options both ends of a cluster share. */
export const ClusterShape = {
  connection: Connection,
  build: z.string().regex(NAME),
  prefix: z.string().regex(NAME).optional(),
  queue: z.string().regex(NAME).optional(),
  connectTimeoutMs: ms(),
  maxRelayBytes: z
    .number()
    .int()
    .min(1024)
    .max(512 * 1024 * 1024)
    .optional(),
};

/** What to pass, by option, when one is wrong. */
export const HINTS: Record<string, string> = {
  connection: 'pass a redis:// URL ("redis://127.0.0.1:6379") or ioredis options ({ host, port, password })',
  build: 'pass the id of the build every host of the queue runs: 1 to 64 of A-Z a-z 0-9 . _ - (a git sha, a version)',
  prefix: 'pass 1 to 64 of A-Z a-z 0-9 . _ -',
  queue: 'pass 1 to 64 of A-Z a-z 0-9 . _ -',
  hostId: 'pass 1 to 64 of A-Z a-z 0-9 . _ -',
  ownerId: 'pass 1 to 64 of A-Z a-z 0-9 . _ -',
  maxRelayBytes: 'pass a whole number of bytes from 1024 to 536870912',
  agents: 'pass an object of logical agent ids to agents ({ researcher: researcherAgent }) or to { module, name }',
  concurrency: 'pass a whole number of attempts from 1 to 4096',
  maxInFlight: 'pass a whole number from 1 to 1048576',
  maxInFlightPerTenant: 'pass a whole number from 1 to 1048576, with tenantOf',
};

/** Parse `options` with `schema`, throwing an `InvalidArgumentError` that names the option and what to pass. */
export function checkOptions<T>(what: string, schema: z.ZodType<T>, options: unknown): T {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidArgumentError(`${what}: pass an options object`);
  }
  // `undefined` means "not given" for every option (callers spread partial configs).
  const given = Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined));
  const parsed = schema.safeParse(given);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const key = String(issue?.path[0] ?? '');
  if (issue?.code === 'unrecognized_keys') {
    throw new InvalidArgumentError(`${what}: unknown option ${issue.keys.join(', ')} (a misspelling?)`);
  }
  const value = (given as Record<string, unknown>)[key];
  const shown = key === 'connection' ? describeConnection(value) : show(value);
  const hint = HINTS[key] ?? (/Ms$/.test(key) ? 'pass a whole number of milliseconds' : (issue?.message ?? ''));
  throw new InvalidArgumentError(
    `${what}: ${key === '' ? 'the options are' : `${key} is`} invalid (got ${shown}): ${hint}`,
  );
}

function show(value: unknown): string {
  if (typeof value === 'function') return 'a function';
  try {
    const text = JSON.stringify(value) ?? String(value);
    return text.length > 80 ? `${text.slice(0, 77)}...` : text;
  } catch {
    return String(value);
  }
}

/** A connection as it may be shown: a URL without its password, or `host:port` of ioredis options. */
export function describeConnection(connection: unknown): string {
  if (typeof connection === 'string') return redactUrl(connection);
  if (typeof connection === 'object' && connection !== null) {
    const o = connection as { host?: unknown; port?: unknown; path?: unknown; tls?: unknown };
    if (typeof o.path === 'string') return `redis+unix://${o.path}`;
    const scheme = o.tls === undefined ? 'redis' : 'rediss';
    return `${scheme}://${typeof o.host === 'string' ? o.host : '127.0.0.1'}:${typeof o.port === 'number' ? o.port : 6379}`;
  }
  return show(connection);
}

/** `url` without its password (`redis://user:***@host:port/db`). */
export function redactUrl(url: string): string {
  return url.replace(/^(rediss?:\/\/)([^@/]*)@/, (_m, scheme: string, auth: string) => {
    const colon = auth.indexOf(':');
    // Without a colon, what stands before the @ may be read as the password: hidden whole.
    return colon < 0 ? `${scheme}***@` : `${scheme}${auth.slice(0, colon)}:***@`;
  });
}
