import type { ParseArgsConfig } from 'node:util';
import { BenchInputError } from './BenchInputError.js';

/** One flag a suite takes after its name (`pnpm bench scope --file my-scope.json`). */
export interface SuiteFlag {
  readonly type: 'string' | 'boolean';
  /** What the value is, for the usage line (`<file>`, `n`); none for a boolean. */
  readonly value?: string;
  readonly description: string;
}

/** A suite's own flags, by name without the leading `--`. */
export type SuiteFlags = Readonly<Record<string, SuiteFlag>>;

/** The values of a suite's flags as parsed (a flag not given is absent). */
export type FlagValues = Readonly<Record<string, string | boolean | undefined>>;

/** The `options` of `node:util` `parseArgs` for a set of flags. */
export function parseArgsOptions(flags: SuiteFlags): NonNullable<ParseArgsConfig['options']> {
  return Object.fromEntries(Object.entries(flags).map(([name, flag]) => [name, { type: flag.type }]));
}

/**
 * The flags as command-line tokens again (`--file=x.json --hops=2`), for the
 * suite's own process; `=` keeps a value that starts with a dash a value.
 */
export function flagTokens(values: FlagValues): string[] {
  const tokens: string[] = [];
  for (const [name, value] of Object.entries(values)) {
    if (value === true) tokens.push(`--${name}`);
    else if (typeof value === 'string') tokens.push(`--${name}=${value}`);
  }
  return tokens;
}

/** A string flag's value, or `undefined` when it was not given. */
export function stringFlag(values: FlagValues, name: string): string | undefined {
  const value = values[name];
  return typeof value === 'string' ? value : undefined;
}

/** An integer flag in `[min, max]`, `fallback` when not given; anything else is a {@link BenchInputError}. */
export function intFlag(values: FlagValues, name: string, fallback: number, min: number, max: number): number {
  const raw = stringFlag(values, name);
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (raw.trim() === '' || !Number.isSafeInteger(value) || value < min || value > max) {
    throw new BenchInputError(`--${name} needs an integer from ${min} to ${max}, got ${raw}`);
  }
  return value;
}
