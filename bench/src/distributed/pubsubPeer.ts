// The far end of the pub/sub figures, in a process of its own: it answers each
// message on `<channel>:in` with the time it arrived (epoch ms), on `<channel>:out`.
// argv: <redis url> <channel>
import { Redis } from 'ioredis';

const [url, channel] = process.argv.slice(2) as [string, string];
const sub = new Redis(url);
const pub = new Redis(url);
sub.on('messageBuffer', (_c: Buffer, message: Buffer) => {
  const at = performance.timeOrigin + performance.now();
  void pub.publish(`${channel}:out`, `${message.toString()} ${at}`);
});
await sub.subscribe(`${channel}:in`);
process.send?.('ready');
process.once('disconnect', () => {
  sub.disconnect();
  pub.disconnect();
  process.exit(0);
});
