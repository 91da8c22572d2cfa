/**
 * @troupe/bullmq/testing — a redis-server of your own for tests, demos and
 * benchmarks of a cluster on one machine.
 */
export { REDIS_MISSING, type RedisServer, type RedisServerOptions, startRedisServer } from './startRedisServer.js';
