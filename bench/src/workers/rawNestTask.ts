// Baseline task of the `scope` suite's nested hop: a raw piscina task that,
// when asked to nest, sends the scope to the main thread over a port of its
// own and waits for the answer, which the main thread gets by running a leaf
// task on the same pool. The same thread crossings as a subagent delegating
// to a subagent (worker → main → another worker → main → worker), without
// the orchestrator.
import { MessageChannel, type MessagePort, parentPort } from 'node:worker_threads';

/** The message a worker posts once on `parentPort` (piscina forwards it as a pool 'message' event). */
export const RAW_NEST_PORT = 'rawNestPort';

let port: MessagePort | undefined;
let nextId = 0;
const waiting = new Map<number, (result: string) => void>();

function open(): MessagePort {
  if (port !== undefined) return port;
  const { port1, port2 } = new MessageChannel();
  parentPort?.postMessage({ [RAW_NEST_PORT]: port2 }, [port2]);
  port1.on('message', ({ id, result }: { id: number; result: string }) => {
    const resolve = waiting.get(id);
    waiting.delete(id);
    resolve?.(result);
  });
  // The pool decides when this thread ends, not this port.
  port1.unref();
  port = port1;
  return port1;
}

export default async function rawNestTask(task: { readonly scope: unknown; readonly nest: boolean }): Promise<string> {
  if (!task.nest) return 'leaf';
  const p = open();
  const id = ++nextId;
  const result = await new Promise<string>((resolve) => {
    waiting.set(id, resolve);
    p.postMessage({ id, scope: task.scope });
  });
  return `relayed:${result}`;
}
