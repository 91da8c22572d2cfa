import { defineScope } from '@troupe/core';
import { createSupervisor } from '@troupe/supervisor';
import { z } from 'zod';
import { assistant } from './agents/quickstart.js';

// Who the agents act for: validated at the edge, deep-frozen, copied to every subagent.
const Scope = defineScope(z.object({ tenantId: z.string(), userId: z.string() }));

const supervisor = createSupervisor({ scope: Scope, pool: { threads: 2 } });
supervisor.on('request.opened', ({ request, path }) => console.log(`${path.join(' > ')} asks: ${request.prompt}`));

const agent = await supervisor.startAgent(assistant, {
  scope: { tenantId: 'acme', userId: 'u-42' },
  toolContext: { requestId: 'req-1' }, // static; tools read ctx.requestId
  metadata: { channel: 'email' }, // state.metadata; changed only through ContextUpdates
});

let reply = await agent.send('Please refund my order A-1');
while (reply.status === 'suspended') {
  // Nothing runs while a person decides; answering resumes the run on a worker.
  reply = await supervisor.answer(reply.request.id, { ok: true });
}
console.log(reply); // { status: 'done', text: 'refunded A-1', turns: 2, usage, totalUsage }
console.log(agent.snapshot().metadata); // { channel: 'email', ordersSeen: ['A-1'] }

await supervisor.close({ timeoutMs: 5000 }); // finish what runs, then stop every worker
