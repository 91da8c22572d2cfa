// Child-process entry: run one suite and send its figures to the harness over IPC.
// Each suite runs in its own process so heaps, pools and CPU placement do not leak between suites.
// Its command line is the harness's: `<suite> <placement> [--quick] [the suite's flags]`, parsed as strictly.
import { parseArgs } from 'node:util';
import { BenchInputError } from './BenchInputError.js';
import type { Figure } from './Suite.js';
import { type FlagValues, parseArgsOptions } from './SuiteFlags.js';
import { findSuite } from './suites/index.js';

const [name, placement, ...rest] = process.argv.slice(2);
const suite = name === undefined ? undefined : findSuite(name);
const send = (message: unknown): void => {
  if (process.send !== undefined) process.send(message);
  else console.log(JSON.stringify(message));
};

if (suite === undefined) {
  send({ type: 'error', message: `unknown suite ${String(name)}` });
  process.exitCode = 2;
} else {
  try {
    const { values } = parseArgs({
      args: rest,
      options: { ...parseArgsOptions(suite.flags ?? {}), quick: { type: 'boolean' } },
      strict: true,
    });
    const { quick, ...flags } = values;
    const body = await suite.load();
    const figures: Figure[] = await body.run({
      quick: quick === true,
      placement: placement === 'pinned' ? 'pinned' : 'unpinned',
      flags: flags as FlagValues,
      progress: (message) => send({ type: 'progress', message }),
    });
    send({ type: 'figures', figures });
  } catch (error) {
    // Bad input (a missing or malformed file, a bad flag) is told in one line; anything else with its stack.
    const input = error instanceof BenchInputError;
    send({
      type: 'error',
      input,
      message: error instanceof Error ? (input ? error.message : (error.stack ?? error.message)) : String(error),
    });
    process.exitCode = input ? 2 : 1;
  }
}
