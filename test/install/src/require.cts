// The install test's consumer, as CommonJS: the packages are ES modules, which
// `require()` loads on every supported Node.js (20.19+, 22.12+, 24+).
import { threadId } from 'node:worker_threads';
import { createSupervisor } from '@troupe/supervisor';
import { probe } from './agents.js';

async function main(): Promise<void> {
  const supervisor = createSupervisor({ pool: { threads: 1 } });
  try {
    const outcome = await supervisor.spawn(probe, { input: 'Where do you run?', scope: { tenantId: 'cjs' } });
    const result: unknown = outcome.status === 'done' ? JSON.parse(outcome.result) : null;
    console.log(JSON.stringify({ mainThreadId: threadId, status: outcome.status, result }));
  } finally {
    await supervisor.close({ timeoutMs: 5000 });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
