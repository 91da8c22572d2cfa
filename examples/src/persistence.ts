// A question outlives its process: one supervisor asks it and closes; a new one on the same file answers it.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sqlitePersistence } from '@troupe/sqlite';
import { createSupervisor } from '@troupe/supervisor';
import { assistant } from './agents/quickstart.js';

const directory = mkdtempSync(join(tmpdir(), 'troupe-persistence-')); // holds troupe.sqlite
const open = () =>
  createSupervisor({
    agents: [assistant], // by name: how a restored conversation finds its agent
    pool: { threads: 2 },
    // Rows are kept by tenant: another tenant's scope neither lists nor answers them.
    persistence: sqlitePersistence({ directory, tenantKey: (scope: { tenantId: string }) => scope.tenantId }),
  });
const scope = { tenantId: 'acme', userId: 'u-42' }; // never saved: every caller supplies it

const first = open();
const agent = await first.startAgent(assistant, { scope, agentId: 'a-1', toolContext: { requestId: 'req-1' } });
console.log((await agent.send('Please refund my order A-1')).status); // suspended
await first.close({ timeoutMs: 5000 }); // the question, the runs waiting on it and the transcript stay in the file

const second = open();
for (const { request, path } of (await second.listRequests(scope)).items) {
  // Restores the conversation (agent a-1, its suspended subagent) with this scope, then resumes it.
  const reply = await second.answer(request.id, { ok: true }, { scope, toolContext: { requestId: 'req-2' } });
  console.log(`${path.join(' > ')}: ${request.prompt} -> ${reply.status === 'done' ? reply.text : reply.status}`);
}
console.log(second.agent('a-1')?.snapshot().metadata); // { ordersSeen: [ 'A-1' ] }
await second.close({ timeoutMs: 5000 });
rmSync(directory, { recursive: true, force: true });
