#!/usr/bin/env node
// `troupe-worker`: a worker host as a command. Takes attempts from the queue
// its API hosts fill and runs them on this machine's threads; SIGTERM (and
// SIGINT) drain it: no new jobs, running attempts get `--drain-ms`, the rest
// are handed back to their owners, then it exits 0.
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { type Agent, isAgent } from '@troupe/core';
import { startWorkerHost } from '../startWorkerHost.js';
import type { AgentModuleRef, WorkerHostOptions } from '../WorkerHostOptions.js';

const USAGE = `usage: troupe-worker --redis <url> --build <id> --agents <module> [options]
  --redis <url>          the Redis 7 server (redis:// or rediss://); or REDIS_URL
  --build <id>           the build this host runs (the API hosts' build)
  --agents <module>      a module exporting \`agents\`: { <logical id>: agent } (or its default export)
  --concurrency <n>      attempts at once (default: the CPUs)
  --queue <name>         the queue (default runs)    --prefix <name>   key prefix (default troupe)
  --host-id <id>         this host's id (default <hostname>-<pid>-<random>)
  --lease-ms <ms>        its lease (default 5000)     --lock-ms <ms>    BullMQ job lock (default 30000)
  --drain-ms <ms>        SIGTERM drain budget (default 30000)
  --help`;

function fail(message: string): never {
  process.stderr.write(`troupe-worker: ${message}\n\n${USAGE}\n`);
  process.exit(2);
}

function int(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isSafeInteger(n)) fail(`--${name} must be a whole number, got ${JSON.stringify(value)}`);
  return n;
}

let args: ReturnType<typeof parse>;
function parse() {
  return parseArgs({
    strict: true,
    allowPositionals: false,
    options: {
      redis: { type: 'string' },
      build: { type: 'string' },
      agents: { type: 'string' },
      concurrency: { type: 'string' },
      queue: { type: 'string' },
      prefix: { type: 'string' },
      'host-id': { type: 'string' },
      'lease-ms': { type: 'string' },
      'lock-ms': { type: 'string' },
      'drain-ms': { type: 'string' },
      help: { type: 'boolean' },
    },
  }).values;
}
try {
  args = parse();
} catch (error) {
  fail((error as Error).message);
}
if (args.help === true) {
  process.stdout.write(`${USAGE}\n`);
  process.exit(0);
}
const redis = args.redis ?? (process.env.REDIS_URL || undefined);
if (redis === undefined) fail('pass --redis <url> (or set REDIS_URL)');
if (args.build === undefined) fail('pass --build <id>');
if (args.agents === undefined) fail('pass --agents <module>');

const moduleUrl = pathToFileURL(resolve(args.agents)).href;
let exported: Record<string, unknown>;
try {
  const m = (await import(moduleUrl)) as Record<string, unknown>;
  exported = (m.agents ?? m.default) as Record<string, unknown>;
} catch (error) {
  fail(`cannot import ${args.agents}: ${(error as Error).message}`);
}
if (typeof exported !== 'object' || exported === null) {
  fail(`${args.agents} exports no \`agents\` object ({ <logical id>: agent })`);
}
const agents: Record<string, Agent | AgentModuleRef> = {};
for (const [id, value] of Object.entries(exported)) {
  if (!isAgent(value)) fail(`${args.agents}: agents.${id} is not an agent (defineAgent(...))`);
  agents[id] = value;
}

const options: WorkerHostOptions = {
  connection: redis,
  build: args.build,
  agents,
  concurrency: int('concurrency', args.concurrency),
  queue: args.queue,
  prefix: args.prefix,
  hostId: args['host-id'],
  leaseMs: int('lease-ms', args['lease-ms']),
  lockDurationMs: int('lock-ms', args['lock-ms']),
  drainMs: int('drain-ms', args['drain-ms']),
};
try {
  const host = await startWorkerHost(options);
  host.on('error', (e) => process.stderr.write(`troupe-worker: ${e.message}\n`));
  process.stdout.write(
    `troupe-worker: host ${host.hostId} ready (build ${host.options.build}, ${host.options.concurrency} slots, queue ${host.options.queue})\n`,
  );
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    process.stdout.write(`troupe-worker: ${signal}: draining (${host.options.drainMs} ms)\n`);
    void host.close().then(() => process.exit(0));
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
} catch (error) {
  process.stderr.write(`troupe-worker: ${(error as Error).message}\n`);
  process.exit(1);
}
