// The worker thread that checkpoints a store's WAL into its database file.
// A checkpoint copies pages and (with synchronous NORMAL or FULL) fsyncs the
// file: milliseconds that, run by the writing connection, would land on
// whichever commit crossed the WAL threshold. Here they run beside the
// writes: a PASSIVE checkpoint never blocks a writer.
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';

/** What the store passes to this worker. */
export interface CheckpointerData {
  readonly file: string;
  readonly synchronous: 'NORMAL' | 'FULL';
  readonly intervalMs: number;
}

const { file, synchronous, intervalMs } = workerData as CheckpointerData;
const db = new Database(file, { timeout: 0 });
db.pragma(`synchronous = ${synchronous}`);
db.pragma('wal_autocheckpoint = 0');
const timer = setInterval(() => {
  try {
    db.pragma('wal_checkpoint(PASSIVE)');
  } catch {
    // Busy or failing disk: the next tick tries again, and the writer's own
    // autocheckpoint (a high threshold) bounds the WAL meanwhile.
  }
}, intervalMs);
parentPort?.on('message', (message) => {
  if (message !== 'close') return;
  clearInterval(timer);
  db.close();
  parentPort?.close();
});
