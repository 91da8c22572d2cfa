// Child-process entry: run one suite and send its figures to the harness over IPC.
// Each suite runs in its own process so heaps, pools and CPU placement do not leak between suites.
import { BenchInputError } from './BenchInputError.js';
import type { Figure } from './Suite.js';
import { findSuite } from './suites/index.js';

const [name, placement, ...rest] = process.argv.slice(2);
const quick = rest.includes('--quick');
const args = rest.filter((a) => a !== '--quick');
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
    const figures: Figure[] = await suite.run({
      quick,
      placement: placement === 'pinned' ? 'pinned' : 'unpinned',
      args,
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
