// A bare worker thread (no Troupe): it runs the analyst's tool body for each
// service it is sent. The demo's yardstick for what the machine's cores give.
import { parentPort } from 'node:worker_threads';
import { countErrors } from '../agents/analyst.js';

parentPort?.on('message', (service: string) => parentPort?.postMessage(countErrors(service)));
// Top-level code runs once the imports have loaded: say so, so no measured run pays for loading.
parentPort?.postMessage('ready');
