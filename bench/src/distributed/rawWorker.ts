// A raw BullMQ worker in a process of its own: the baseline of the distributed
// suite. It takes jobs of its queue and returns at once (or after `work` ms of
// I/O wait, for the fan-out figure), stamping when it took each job.
// argv: <redis url> <queue> <concurrency>
import { Worker } from 'bullmq';
import { Redis } from 'ioredis';

const [url, queue, concurrency] = process.argv.slice(2) as [string, string, string];
const connection = new Redis(url, { maxRetriesPerRequest: null });
const worker = new Worker(
  queue,
  async (job) => {
    const took = performance.timeOrigin + performance.now();
    const waitMs = (job.data as { waitMs?: number }).waitMs ?? 0;
    if (waitMs > 0) await new Promise((r) => setTimeout(r, waitMs));
    return took;
  },
  { connection, concurrency: Number(concurrency), prefix: 'bench', removeOnComplete: { count: 0 } },
);
await worker.waitUntilReady();
process.send?.('ready');
process.once('disconnect', () => {
  void worker
    .close()
    .then(() => connection.quit())
    .then(() => process.exit(0));
});
