import type { Style } from './Style.js';

/**
 * Where the demo writes. Two kinds: {@link LiveOutput} on a terminal (colour,
 * a live region redrawn in place, lines paced for a reader) and
 * {@link PlainOutput} everywhere else (one plain line after another).
 * Lines are given wrapped to {@link Output.width}, with their figures marked
 * (`fig`); the output paints them.
 */
export interface Output {
  /** True on a terminal: the live region is redrawn in place. */
  readonly live: boolean;
  /** Columns a line may take (80 at most). */
  readonly width: number;
  readonly style: Style;
  /** Print lines above the live region (queued and paced on a terminal). */
  print(...lines: readonly string[]): void;
  /** Show `render()` in the live region, redrawn until `commit()`; a plain output shows it at `commit()`. */
  follow(render: (() => readonly string[]) | undefined): void;
  /** Print the live region's current frame for good and stop following it. */
  commit(): void;
  /** Resolve once every queued line is printed. */
  drain(): Promise<void>;
  /** Wait `ms` for a reader (not in plain mode). */
  pause(ms: number): Promise<void>;
  /** Print what is queued and give the terminal back (cursor shown); later output is dropped. Idempotent. */
  close(): void;
}
