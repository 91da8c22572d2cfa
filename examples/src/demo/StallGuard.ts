import { DemoFailure } from './Narrator.js';
import { waitingFor } from './waits.js';

/**
 * Turns a scene that can no longer finish into a failure that says so. A
 * scene waits for things its agents do (an event, a tool starting on a
 * worker); when they never do — a real model that does not follow the
 * scene's script answers instead of delegating — nothing is left to run, and
 * Node would end the process with exit code 13 and no word. The process's
 * `beforeExit` (emitted exactly then) fails the scene instead, naming it and
 * what it was waiting for, so the demo exits 1 with a ✗ line.
 */
export class StallGuard {
  readonly #explain: (scene: string, waits: readonly string[]) => string;
  #scene: string | undefined;
  #fail: ((error: Error) => void) | undefined;
  readonly #onBeforeExit = (): void => {
    const fail = this.#fail;
    if (fail === undefined || this.#scene === undefined) return;
    this.#fail = undefined;
    fail(new DemoFailure(this.#explain(this.#scene, waitingFor())));
  };

  constructor(explain: (scene: string, waits: readonly string[]) => string) {
    this.#explain = explain;
    process.on('beforeExit', this.#onBeforeExit);
  }

  /** Run scene `name`: its work's result, or a {@link DemoFailure} if it stalls. */
  async run<T>(name: string, work: () => Promise<T>): Promise<T> {
    this.#scene = name;
    const stalled = new Promise<never>((_, reject) => {
      this.#fail = reject;
    });
    try {
      return await Promise.race([work(), stalled]);
    } finally {
      this.#scene = undefined;
      this.#fail = undefined;
    }
  }

  close(): void {
    process.off('beforeExit', this.#onBeforeExit);
  }
}
