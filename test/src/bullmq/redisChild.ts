// A test process that starts a Redis of its own and then waits to be killed
// (`start`), or tries to start one and prints what it was told (`missing`,
// run with a PATH that has no redis-server).
import { startRedis } from '../servers/redis.js';

const mode = process.argv[2];
if (mode === 'missing') {
  try {
    await startRedis();
    process.stdout.write('started\n');
  } catch (error) {
    process.stdout.write(`${(error as Error).message}\n`);
  }
} else {
  const redis = await startRedis();
  process.stdout.write(`${JSON.stringify({ pid: redis.pid, port: redis.port })}\n`);
  // Stay until killed.
  setInterval(() => {}, 1 << 30);
}
