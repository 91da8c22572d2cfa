import { Redis, type RedisOptions } from 'ioredis';
import { ClusterError, RedisConfigError, RedisUnreachableError } from '../ClusterError.js';

/** A client for long-lived use: BullMQ's workers block, so a request never gives up on a reconnect. */
export function redisClient(connection: string | RedisOptions, name: string): Redis {
  const options: RedisOptions = { maxRetriesPerRequest: null, lazyConnect: true, connectionName: name };
  return typeof connection === 'string' ? new Redis(connection, options) : new Redis({ ...connection, ...options });
}

/** The lowest Redis major version the cluster runs on. */
const MIN_MAJOR = 7;

/**
 * Check, before anything starts, that Redis answers within `timeoutMs`, is
 * Redis 7 or later, and evicts nothing (`maxmemory-policy noeviction`).
 * Throws a {@link RedisUnreachableError} naming `shown` (the URL without its
 * password) or a {@link RedisConfigError}; closes its one connection either way.
 */
export async function probeRedis(connection: string | RedisOptions, shown: string, timeoutMs: number): Promise<void> {
  const options: RedisOptions = {
    lazyConnect: true,
    // One try: the caller is told at once, nothing retries in the background.
    retryStrategy: () => null,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    connectTimeout: timeoutMs,
    connectionName: 'troupe-probe',
  };
  const client =
    typeof connection === 'string' ? new Redis(connection, options) : new Redis({ ...connection, ...options });
  // Errors surface through the calls below; a listener keeps ioredis from printing them.
  client.on('error', () => {});
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new RedisUnreachableError(shown, `no answer within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    await Promise.race([check(client, shown), timeout]);
  } catch (error) {
    if (error instanceof ClusterError) throw error;
    const detail = error instanceof Error ? error.message : String(error);
    throw new RedisUnreachableError(shown, detail, { cause: error });
  } finally {
    clearTimeout(timer);
    client.disconnect();
  }
}

async function check(client: Redis, shown: string): Promise<void> {
  await client.connect();
  const server = await client.info('server');
  const version = /redis_version:(\d+)\.(\d+)/.exec(server);
  if (version === null || Number(version[1]) < MIN_MAJOR) {
    throw new RedisConfigError(
      `Redis at ${shown} is ${version === null ? 'of an unknown version' : `${version[1]}.${version[2]}`}: run Redis ${MIN_MAJOR} or later`,
    );
  }
  // CONFIG may be disabled (managed services): INFO says the policy too.
  const memory = await client.info('memory');
  const policy = /maxmemory_policy:(\S+)/.exec(memory)?.[1];
  if (policy !== 'noeviction') {
    throw new RedisConfigError(
      `Redis at ${shown} runs maxmemory-policy ${policy ?? '(unknown)'}: set it to noeviction (maxmemory-policy noeviction in redis.conf, or CONFIG SET maxmemory-policy noeviction). Under memory pressure any other policy may evict a job, its lock or a cancel flag, and run work twice or not stop it`,
    );
  }
}
