import type { TopLevelSpec } from 'vega-lite';
import type { FlagValues, SuiteFlags } from './SuiteFlags.js';

/** One measured figure, as written to the bench JSON. */
export interface Figure {
  readonly suite: string;
  /** Dotted name, e.g. `cancel.check_ns`; stable once published. */
  readonly name: string;
  readonly value: number;
  readonly unit: string;
  /** The same-run baseline this figure is compared with. */
  readonly baseline?: { readonly name: string; readonly value: number };
  /** value / baseline.value, or another ratio the name says. */
  readonly ratio?: number;
  /** Where the threads ran: one CPU (`taskset -c 0`) or wherever the OS put them. */
  readonly placement?: 'pinned' | 'unpinned';
  /** Extra numbers (p95, samples, ...) for the table. */
  readonly detail?: Readonly<Record<string, number | string>>;
}

/** What a suite gets from the harness. */
export interface SuiteContext {
  /** The reduced run (`--quick`): fewer samples, same figures. */
  readonly quick: boolean;
  readonly placement: 'pinned' | 'unpinned';
  /** Report progress (a line when not a TTY). */
  progress(message: string): void;
  /** The values of the suite's own {@link Suite.flags} given on the command line (e.g. `--file my-scope.json`). */
  readonly flags: FlagValues;
}

/** A chart of a suite's figures: a Vega-Lite spec, rendered to `bench/results/<name>.svg`. */
export interface Chart {
  /** File name without extension, e.g. `scope-hop-vs-size`. */
  readonly name: string;
  readonly spec: TopLevelSpec;
}

/**
 * A benchmark suite as the harness knows it before running it: what it shows, checks and
 * schedules. Its code is {@link SuiteInfo.load}ed only in the child process that runs it.
 */
export interface SuiteInfo {
  readonly name: string;
  readonly description: string;
  /**
   * Latency suites are run under both placements (or pinned only with `--pin`).
   * A function decides from the suite's own flags (e.g. a one-off `--file` measurement runs once).
   */
  readonly placementSensitive: boolean | ((flags: FlagValues) => boolean);
  /**
   * Flags the suite takes after its name (`pnpm bench scope --file x.json`); any
   * other flag is refused before anything runs, and these are refused without the suite named.
   */
  readonly flags?: SuiteFlags;
  /** Whether `pnpm bench` with no suite named runs it. */
  readonly inDefaultRun: boolean;
  /** The suite's code: what it measures, and its charts. */
  load(): Promise<SuiteBody>;
}

/** A benchmark suite's code: a program that measures and returns figures. */
export interface SuiteBody {
  run(context: SuiteContext): Promise<Figure[]>;
  /** Charts of this suite's figures from one `pnpm bench` run (both placements); none when empty. */
  charts?(figures: readonly Figure[]): readonly Chart[];
}
