// The piscina worker entry: one task = one subagent run.
import { parentPort, threadId } from 'node:worker_threads';
import { WORKER_READY } from '@troupe/core';
import { runSubagentTask } from './runSubagentTask.js';

// Piscina loads this module when the thread boots: tell the pool this thread
// is really ready (piscina itself reports its first threads ready at once).
parentPort?.postMessage({ [WORKER_READY]: threadId });

export default runSubagentTask;
