// A supervisor on SQLite that answers one open request and is killed (by crashWindow.test.ts)
// while the re-run tool is inside its side effect.
//
//   WINDOW_FILE=<db> WINDOW_EFFECTS=<log> WINDOW_REQUEST=<id> node crashWindowChild.js
import { sqlitePersistence } from '@troupe/sqlite';
import { createSupervisor } from '@troupe/supervisor';
import { depot } from '../fixtures/agents/crashWindow.js';

const store = sqlitePersistence({
  file: process.env.WINDOW_FILE as string,
  tenantKey: (s) => (s as { org: string }).org,
});
const supervisor = createSupervisor({ agents: [depot], persistence: store, pool: { threads: 1, graceMs: 100 } });
await supervisor.answer(
  process.env.WINDOW_REQUEST as string,
  { ok: true },
  {
    scope: { org: 'acme', userId: 'bob' },
    toolContext: { effects: process.env.WINDOW_EFFECTS, holdAfterEffect: true },
  },
);
process.stdout.write('answered without being killed\n');
