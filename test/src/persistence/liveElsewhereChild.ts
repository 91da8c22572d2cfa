// A supervisor on SQLite whose subagent is killed (by liveElsewhere.test.ts, SIGKILL) inside its
// side effect: the cashier's charge, after its model call spent 100/10 tokens.
//
//   node liveElsewhereChild.js <db> <effects log>
import { sqlitePersistence } from '@troupe/sqlite';
import { createSupervisor } from '@troupe/supervisor';
import { office } from '../fixtures/agents/durable.js';

const [file, effects] = process.argv.slice(2);
const store = sqlitePersistence({ file: file as string, tenantKey: (s) => (s as { org: string }).org });
const supervisor = createSupervisor({ agents: [office], persistence: store, pool: { threads: 1, graceMs: 100 } });
const agent = await supervisor.startAgent(office, {
  scope: { org: 'acme', userId: 'alice' },
  agentId: 'office-l3',
  toolContext: { effects, pauseMs: 60_000 },
});
await agent.send('delegate a charge');
