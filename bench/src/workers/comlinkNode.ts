// comlink's endpoint for a node:worker_threads MessagePort (what comlink's own node-adapter does:
// `message` events wrapped as `{ data }`), written here because that adapter ships without types
// for its ESM build.
import type { MessagePort } from 'node:worker_threads';
import type * as Comlink from 'comlink';

type Listener = (event: { data: unknown }) => void;

export function nodeEndpoint(port: MessagePort): Comlink.Endpoint {
  const wrapped = new WeakMap<Listener, (data: unknown) => void>();
  const endpoint = {
    postMessage: (message: unknown, transfer?: readonly unknown[]) => port.postMessage(message, transfer as never),
    addEventListener: (_type: string, listener: Listener) => {
      const handler = (data: unknown) => listener({ data });
      wrapped.set(listener, handler);
      port.on('message', handler);
    },
    removeEventListener: (_type: string, listener: Listener) => {
      const handler = wrapped.get(listener);
      if (handler === undefined) return;
      port.off('message', handler);
      wrapped.delete(listener);
    },
    start: () => port.start(),
  };
  return endpoint as unknown as Comlink.Endpoint;
}
