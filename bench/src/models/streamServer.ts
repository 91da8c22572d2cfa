// Starts the stream server (`workers/streamServer.ts`) in its own thread.
import { once } from 'node:events';
import { Worker } from 'node:worker_threads';

export interface StreamServer {
  /** The OpenAI-compatible root. */
  readonly baseURL: string;
  close(): Promise<void>;
}

/** A server whose every answer streams `deltas` text chunks; the request's model picks `burst` or `paced`. */
export async function startStreamServer(deltas: number): Promise<StreamServer> {
  const worker = new Worker(new URL('../workers/streamServer.js', import.meta.url), { workerData: { deltas } });
  const [port] = (await once(worker, 'message')) as [number];
  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    async close() {
      const exited = once(worker, 'exit');
      worker.postMessage('close');
      await exited;
    },
  };
}
