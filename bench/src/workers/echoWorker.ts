// Baseline worker of the `scope` suite: answers every message with a one-byte
// ack, so a send + ack is a raw postMessage round trip of the payload.
import { parentPort } from 'node:worker_threads';

parentPort?.on('message', () => parentPort?.postMessage(0));
