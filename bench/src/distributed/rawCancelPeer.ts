// The raw baseline of the cross-host cancel, in a process of its own: armed (`arm` on
// `<channel>:in`, answered `spinning`), a worker thread spins on an Int32Array slot as a busy
// tool does; the next message stores 1 into it (what a worker host does with a cancel), the
// thread notes when it sees it (epoch ms), and the time goes back on `<channel>:out`. The same hops as the cancel — Redis, a process's event
// loop, an Atomics store, a spinning thread — with nothing of Troupe. argv: <redis url> <channel>
import { Worker } from 'node:worker_threads';
import { Redis } from 'ioredis';

const [url, channel] = process.argv.slice(2) as [string, string];
const flag = new Int32Array(new SharedArrayBuffer(4));
// 0 idle (the thread waits), 3 armed (it spins), 1 cancelled (set here), 2 seen (set by the
// thread; set back to 0 here). It spins only while armed, as the tool spins only while it runs.
const spinner = new Worker(
  `const { parentPort, workerData: flag } = require('node:worker_threads');
   for (;;) {
     Atomics.wait(flag, 0, 0);
     parentPort.postMessage('spinning');
     while (Atomics.load(flag, 0) !== 1) {}
     const seen = performance.timeOrigin + performance.now();
     Atomics.store(flag, 0, 2);
     parentPort.postMessage(seen);
     while (Atomics.load(flag, 0) === 2) {}
   }`,
  { eval: true, workerData: flag },
);
const sub = new Redis(url);
const pub = new Redis(url);
let current = '';
sub.on('messageBuffer', (_c: Buffer, message: Buffer) => {
  const text = message.toString();
  if (text === 'arm') {
    Atomics.store(flag, 0, 3);
    Atomics.notify(flag, 0);
    return;
  }
  current = text;
  Atomics.store(flag, 0, 1);
});
spinner.on('message', (m: 'spinning' | number) => {
  if (m === 'spinning') {
    void pub.publish(`${channel}:out`, 'spinning');
    return;
  }
  Atomics.store(flag, 0, 0);
  void pub.publish(`${channel}:out`, `${current} ${m}`);
});
await sub.subscribe(`${channel}:in`);
process.send?.('ready');
process.once('disconnect', () => {
  sub.disconnect();
  pub.disconnect();
  void spinner.terminate().then(() => process.exit(0));
});
