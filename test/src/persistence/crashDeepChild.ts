// A supervisor on SQLite that sends desk a message and is killed (by crashDeep.test.ts, SIGKILL)
// while the clerk's tool, two levels down, runs.
//
//   DEEP_FILE=<db> DEEP_EFFECTS=<log> node crashDeepChild.js
import { sqlitePersistence } from '@troupe/sqlite';
import { createSupervisor } from '@troupe/supervisor';
import { desk } from '../fixtures/agents/deepDesk.js';

const store = sqlitePersistence({
  file: process.env.DEEP_FILE as string,
  tenantKey: (s) => (s as { org: string }).org,
});
const supervisor = createSupervisor({ agents: [desk], persistence: store, pool: { threads: 1, graceMs: 100 } });
const agent = await supervisor.startAgent(desk, {
  scope: { org: 'acme', userId: 'alice' },
  agentId: 'desk-1',
  toolContext: { effects: process.env.DEEP_EFFECTS, holdInTool: true },
});
await agent.send('file the paper');
process.stdout.write('replied without being killed\n');
