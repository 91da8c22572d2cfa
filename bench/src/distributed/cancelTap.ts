// An idle process that reads every worker host's channel of the cancel figure and notes when
// each cancel arrives (`tap <epoch ms>` in the log): how long the API host and Redis took,
// seen from a process with nothing else to do. argv: <redis url> <queue> <log file>
import { appendFileSync } from 'node:fs';
import { decodeToHost, RedisNames } from '@troupe/bullmq/internal';
import { Redis } from 'ioredis';

const [url, queue, log] = process.argv.slice(2) as [string, string, string];
const names = new RedisNames('troupe', queue);
const sub = new Redis(url);
sub.on('pmessageBuffer', (_p: Buffer, _c: Buffer, bytes: Buffer) => {
  const at = performance.timeOrigin + performance.now();
  const m = decodeToHost(bytes, 1 << 20);
  if (typeof m !== 'string' && m[0] === 'cancel') appendFileSync(log, `tap ${at}\n`);
});
await sub.psubscribe(names.toHost('*'));
process.send?.('ready');
process.once('disconnect', () => {
  sub.disconnect();
  process.exit(0);
});
