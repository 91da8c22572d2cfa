// A program (run by runTree.test.ts, item 13's close case): a parent agent's reply is being
// saved to a store that never answers, and the program awaits `close({ timeoutMs: 100 })`.
// Nothing but the close keeps this process alive then (the run is over; the write holds no
// handle): if nothing held it, Node would exit 13 (an unsettled top-level await) before the
// close's deadline and grace period ended, and `closed` would never be printed.
import { createSupervisor } from '@troupe/supervisor';
import { echo } from '../fixtures/agents/basic.js';
import { HangingStore } from '../fixtures/hangingStore.js';

const store = new HangingStore();
const supervisor = createSupervisor({ pool: { threads: 1, graceMs: 100 }, persistence: store });
const agent = await supervisor.startAgent(echo, { scope: {} });
store.hang = true;
agent.send('hello').catch(() => {});
await store.entered;
await supervisor.close({ timeoutMs: 100 });
console.log(`closed agents=${supervisor.stats().agents}`);
