/** What the demo waits for now (an event, a tool to start), each named: a stall then says what never came. */
const open = new Map<string, number>();

/** Name `promise` as `what` until it settles, and return it. */
export function waitFor<T>(what: string, promise: Promise<T>): Promise<T> {
  open.set(what, (open.get(what) ?? 0) + 1);
  const done = (): void => {
    const left = (open.get(what) ?? 1) - 1;
    if (left <= 0) open.delete(what);
    else open.set(what, left);
  };
  promise.then(done, done);
  return promise;
}

/** What is waited for now, oldest first. */
export function waitingFor(): string[] {
  return [...open.keys()];
}
