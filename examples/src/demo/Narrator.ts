/** A claim the demo printed did not hold. */
export class DemoFailure extends Error {
  override readonly name = 'DemoFailure';
}

/**
 * Prints the demo's narrative. Every `✓` line is a checked claim: `check`
 * prints it only when it holds and throws a {@link DemoFailure} otherwise, so
 * the demo cannot show something that did not happen.
 */
export class Narrator {
  #checks = 0;
  readonly #out: (line: string) => void;

  constructor(out: (line: string) => void = (line) => console.log(line)) {
    this.#out = out;
  }

  /** How many claims held so far. */
  get checks(): number {
    return this.#checks;
  }

  scene(title: string): void {
    this.#out(`\n${title}`);
  }

  /** A measurement or an explanation (not a claim). */
  say(text: string): void {
    this.#out(`   ${text}`);
  }

  /** Print `claim` if `holds`, else fail the demo with `detail`. */
  check(holds: boolean, claim: string, detail?: unknown): asserts holds {
    if (!holds) {
      throw new DemoFailure(
        `${claim}${detail === undefined ? '' : ` — got ${typeof detail === 'string' ? detail : JSON.stringify(detail)}`}`,
      );
    }
    this.#checks++;
    this.#out(`   ✓ ${claim}`);
  }
}

/** `1.2 µs`, `3.4 ms`, `1.20 s`: the unit a reader expects at that magnitude. */
export function formatDuration(ms: number): string {
  if (ms < 1) return `${(ms * 1000).toFixed(1)} µs`;
  if (ms < 1000) return `${ms.toFixed(ms < 10 ? 1 : 0)} ms`;
  return `${(ms / 1000).toFixed(2)} s`;
}

/** `97 B`, `17.3 KiB`. */
export function formatBytes(bytes: number): string {
  return bytes < 1024 ? `${bytes} B` : `${(bytes / 1024).toFixed(1)} KiB`;
}
