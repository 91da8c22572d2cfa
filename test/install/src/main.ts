// The install test's consumer, as an ES module: a supervisor with a zod scope
// spawns the probe on a worker thread and prints the outcome as one JSON line.
import { threadId } from 'node:worker_threads';
import { defineScope, isTroupeError } from '@troupe/core';
import { createSupervisor, type SubagentOutcome } from '@troupe/supervisor';
import { z } from 'zod';
import { probe } from './agents.js';

const Scope = defineScope(z.object({ tenantId: z.string(), userId: z.string() }));

await using supervisor = createSupervisor({ scope: Scope, pool: { threads: 1 } });
const outcome: SubagentOutcome = await supervisor.spawn(probe, {
  input: 'Where do you run?',
  scope: { tenantId: 'acme', userId: 'u-1' },
});
// A scope the schema refuses never reaches a worker. (Written as it arrives
// from outside, untyped: tsc refuses { tenantId: 42 } written out.)
const refused = await supervisor.spawn(probe, { input: 'again', scope: JSON.parse('{ "tenantId": 42 }') }).then(
  () => 'accepted',
  (error: unknown) => (isTroupeError(error) ? error.code : String(error)),
);
console.log(
  JSON.stringify({
    mainThreadId: threadId,
    status: outcome.status,
    result: outcome.status === 'done' ? JSON.parse(outcome.result) : null,
    updates: outcome.status === 'done' ? outcome.updates : null,
    refused,
  }),
);
