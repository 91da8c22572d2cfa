import type { Supervisor, SupervisorEvents } from '@troupe/supervisor';

/** Resolve with the next emission of `name` that passes `filter`. */
export function nextEvent<K extends keyof SupervisorEvents>(
  supervisor: Supervisor,
  name: K,
  filter: (payload: SupervisorEvents[K][0]) => boolean = () => true,
): Promise<SupervisorEvents[K][0]> {
  return new Promise((resolve) => {
    const listener = (payload: SupervisorEvents[K][0]): void => {
      if (!filter(payload)) return;
      supervisor.off(name as keyof SupervisorEvents, listener as never);
      resolve(payload);
    };
    supervisor.on(name as keyof SupervisorEvents, listener as never);
  });
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
