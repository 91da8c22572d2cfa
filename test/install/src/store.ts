// The install test's consumer, with @troupe/sqlite: a conversation saved in an
// SQLite file outlives its supervisor. A parent agent runs the probe's tool
// (which appends to its metadata), the supervisor closes (and the store with
// it), and a new supervisor on the same file restores the agent by its ids.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defineScope } from '@troupe/core';
import { sqlitePersistence } from '@troupe/sqlite';
import { createSupervisor } from '@troupe/supervisor';
import { z } from 'zod';
import { probe } from './agents.js';

const Scope = defineScope(z.object({ tenantId: z.string() }));
const directory = mkdtempSync(join(tmpdir(), 'troupe-consumer-store-'));
const ids = { agentId: 'probe-1', conversationId: 'conversation-1' };
try {
  const first = createSupervisor({ scope: Scope, persistence: sqlitePersistence({ directory }), pool: { threads: 1 } });
  const agent = await first.startAgent(probe, { ...ids, scope: { tenantId: 'acme' } });
  const reply = await agent.send('Where do you run?');
  await first.close({ timeoutMs: 5000 });

  const second = createSupervisor({
    scope: Scope,
    persistence: sqlitePersistence({ directory }),
    pool: { threads: 1 },
  });
  const restored = await second.startAgent(probe, { ...ids, scope: { tenantId: 'acme' } });
  const metadata = restored.snapshot().metadata;
  await second.close({ timeoutMs: 5000 });
  console.log(
    JSON.stringify({ status: reply.status, file: existsSync(join(directory, 'troupe.sqlite')), restored: metadata }),
  );
} finally {
  rmSync(directory, { recursive: true, force: true });
}
