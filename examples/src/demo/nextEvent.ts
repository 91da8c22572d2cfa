import type { Supervisor, SupervisorEvents } from '@troupe/supervisor';
import { waitFor } from './waits.js';

/** Resolve with the next emission of `name` that passes `filter`; `what` names it while it is awaited. */
export function nextEvent<K extends keyof SupervisorEvents>(
  supervisor: Supervisor,
  name: K,
  filter: (payload: SupervisorEvents[K][0]) => boolean = () => true,
  what = `the event ${name}`,
): Promise<SupervisorEvents[K][0]> {
  return waitFor(
    what,
    new Promise((resolve) => {
      const listener = (payload: SupervisorEvents[K][0]): void => {
        if (!filter(payload)) return;
        supervisor.off(name as keyof SupervisorEvents, listener as never);
        resolve(payload);
      };
      supervisor.on(name as keyof SupervisorEvents, listener as never);
    }),
  );
}

/** Every emission of `name` from now on, until `stop()`. */
export function collect<K extends keyof SupervisorEvents>(
  supervisor: Supervisor,
  name: K,
): SupervisorEvents[K][0][] & { stop(): void } {
  const seen = [] as unknown as SupervisorEvents[K][0][] & { stop(): void };
  const listener = (payload: SupervisorEvents[K][0]): void => {
    seen.push(payload);
  };
  supervisor.on(name as keyof SupervisorEvents, listener as never);
  seen.stop = () => supervisor.off(name as keyof SupervisorEvents, listener as never);
  return seen;
}
