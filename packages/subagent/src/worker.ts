// The piscina worker entry: one task = one subagent run.
import { parentPort } from 'node:worker_threads';
import { WORKER_READY } from '@troupe/core/internal';
import { runSubagentTask } from './runSubagentTask.js';

// Piscina loads this module when the thread boots: tell the pool this thread
// is really ready (piscina itself reports its first threads ready at once).
// (The supervisor knows which thread it is from the Worker the message comes out of.)
parentPort?.postMessage({ [WORKER_READY]: true });

export default runSubagentTask;
