// The tests' Redis: @troupe/bullmq/testing's startRedisServer (one helper for
// tests, the cluster demo and the distributed benchmark).
export {
  REDIS_MISSING,
  type RedisServer,
  type RedisServerOptions,
  startRedisServer as startRedis,
} from '@troupe/bullmq/testing';
