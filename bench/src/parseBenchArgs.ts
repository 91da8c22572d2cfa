import { type ParseArgsConfig, parseArgs } from 'node:util';
import { BenchInputError } from './BenchInputError.js';
import type { SuiteInfo } from './Suite.js';
import { type FlagValues, parseArgsOptions, type SuiteFlags } from './SuiteFlags.js';

/** What `pnpm bench ...` asked for. */
export interface BenchArgs {
  readonly quick: boolean;
  readonly pin: boolean;
  readonly help: boolean;
  readonly json: string | undefined;
  /** Re-render the charts of a saved `--json` file instead of measuring. */
  readonly chartsFrom: string | undefined;
  /** The suites named, in order (none named: every suite in the default run). */
  readonly selected: readonly SuiteInfo[];
  /** Each selected suite's own flags, by suite name. */
  readonly suiteFlags: ReadonlyMap<string, FlagValues>;
}

/** The flags of the harness itself, whatever the suites. */
export const HARNESS_FLAGS: SuiteFlags = {
  quick: { type: 'boolean', description: 'reduced run (under a minute)' },
  pin: { type: 'boolean', description: 'run latency suites pinned to one CPU only (default: pinned and unpinned)' },
  json: { type: 'string', value: '<file>', description: 'write machine-readable figures to <file>' },
  'charts-from': {
    type: 'string',
    value: '<file>',
    description: 're-render the charts of a saved --json file (no measuring)',
  },
  help: { type: 'boolean', description: 'this text' },
};

/**
 * Parse `pnpm bench [suite ...] [flags]` with `node:util` `parseArgs` in strict
 * mode: the harness's flags and the flags each suite declares. An unknown flag,
 * a flag without its value, a value given to a switch, an unknown suite or a
 * suite's flag without that suite named is a {@link BenchInputError} that says
 * what to type instead.
 */
export function parseBenchArgs(argv: readonly string[], suites: readonly SuiteInfo[]): BenchArgs {
  const owners = flagOwners(suites);
  const flags: Record<string, SuiteFlags[string]> = { ...HARNESS_FLAGS };
  for (const [name, { flag }] of owners) flags[name] = flag;
  const options = { ...parseArgsOptions(flags), help: { type: 'boolean', short: 'h' } } satisfies NonNullable<
    ParseArgsConfig['options']
  >;
  // pnpm forwards a `--` typed before the flags; it separates nothing here.
  const args = joinNegativeValues(
    argv.filter((a) => a !== '--'),
    flags,
  );
  let values: Readonly<Record<string, string | boolean | undefined>>;
  let positionals: readonly string[];
  try {
    ({ values, positionals } = parseArgs({ args, options, allowPositionals: true, strict: true }));
  } catch (error) {
    throw new BenchInputError(parseError(error, args, Object.keys(flags)));
  }
  const selected: SuiteInfo[] = [];
  for (const name of positionals) {
    const suite = suites.find((s) => s.name === name);
    if (suite === undefined) {
      throw new BenchInputError(`unknown suite "${name}"; the suites are: ${suites.map((s) => s.name).join(', ')}`);
    }
    if (!selected.includes(suite)) selected.push(suite);
  }
  const suiteFlags = new Map<string, Record<string, string | boolean | undefined>>();
  for (const [name, { suites: declaring }] of owners) {
    const value = values[name];
    if (value === undefined) continue;
    const named = selected.filter((s) => declaring.includes(s));
    if (named.length === 0) {
      const suite = declaring[0] as SuiteInfo;
      throw new BenchInputError(
        `--${name} is a flag of the ${declaring.map((s) => s.name).join(' and ')} suite: name it, as in pnpm bench ${suite.name} --${name}${typeof value === 'string' ? ` ${value}` : ''}`,
      );
    }
    for (const suite of named) {
      const own = suiteFlags.get(suite.name) ?? {};
      own[name] = value;
      suiteFlags.set(suite.name, own);
    }
  }
  return {
    quick: values.quick === true,
    pin: values.pin === true,
    help: values.help === true,
    json: typeof values.json === 'string' ? values.json : undefined,
    chartsFrom: typeof values['charts-from'] === 'string' ? values['charts-from'] : undefined,
    selected: selected.length > 0 ? selected : suites.filter((s) => s.inDefaultRun),
    suiteFlags,
  };
}

/** Every suite flag, with the suites that declare it; a flag declared twice must mean the same. */
function flagOwners(suites: readonly SuiteInfo[]): Map<string, { flag: SuiteFlags[string]; suites: SuiteInfo[] }> {
  const owners = new Map<string, { flag: SuiteFlags[string]; suites: SuiteInfo[] }>();
  for (const suite of suites) {
    for (const [name, flag] of Object.entries(suite.flags ?? {})) {
      if (name in HARNESS_FLAGS) throw new Error(`suite ${suite.name} declares --${name}, a flag of the harness`);
      const known = owners.get(name);
      if (known === undefined) owners.set(name, { flag, suites: [suite] });
      else if (known.flag.type !== flag.type) {
        throw new Error(
          `--${name} is a ${known.flag.type} for ${known.suites[0]?.name} and a ${flag.type} for ${suite.name}`,
        );
      } else known.suites.push(suite);
    }
  }
  return owners;
}

/**
 * `--hops -1` as `--hops=-1`: parseArgs takes a value that starts with a dash
 * for a flag it does not know; a negative number is a value, which the suite
 * then refuses with the range it takes.
 */
function joinNegativeValues(args: readonly string[], flags: SuiteFlags): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string;
    const next = args[i + 1];
    const name = a.startsWith('--') ? a.slice(2) : undefined;
    if (name !== undefined && flags[name]?.type === 'string' && next !== undefined && /^-\d/.test(next)) {
      out.push(`${a}=${next}`);
      i++;
    } else out.push(a);
  }
  return out;
}

/** parseArgs' error in one line, with the nearest known flag for a misspelt one. */
function parseError(error: unknown, args: readonly string[], known: readonly string[]): string {
  const code = (error as { code?: unknown }).code;
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
    const { tokens } = parseArgs({ args: [...args], strict: false, allowPositionals: true, tokens: true });
    const unknown = tokens.find((t) => t.kind === 'option' && t.name !== 'h' && !known.includes(t.name));
    if (unknown?.kind === 'option') {
      const near = nearest(unknown.name, known);
      return `unknown flag ${unknown.rawName}${near === undefined ? '' : ` (did you mean --${near}?)`}`;
    }
  }
  return (error as Error).message.replace(/\s*\n\s*/g, ' ');
}

/** The known flag within two edits of `name`, if any. */
function nearest(name: string, known: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = 3;
  for (const candidate of known) {
    const d = editDistance(name, candidate);
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

function editDistance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      next[j] = Math.min((row[j] as number) + 1, (next[j - 1] as number) + 1, (row[j - 1] as number) + cost);
    }
    row = next;
  }
  return row[b.length] as number;
}
