// An API host of the takeover figure: a PostgreSQL store (its lease renewed) that saves one running
// run of conversation `HOST_CONVERSATION`, says `ready`, and runs until the bench kills it (SIGKILL).
import type { AgentId } from '@troupe/core';
import { postgresPersistence } from '@troupe/postgres';

const env = process.env;
const conversationId = env.HOST_CONVERSATION as string;
const store = await postgresPersistence({
  connectionString: env.HOST_URL as string,
  schema: env.HOST_SCHEMA as string,
  leaseMs: Number(env.HOST_LEASE_MS),
  tenantKey: (s) => (s as { tenant: string }).tenant,
});
const agentId = `agent-${conversationId}` as AgentId;
const usage = { inputTokens: 1, outputTokens: 1 };
await store.commit(
  { tenant: 'bench' },
  {
    runs: [
      {
        runId: `run-${conversationId}`,
        conversationId,
        agentId,
        agentName: 'bench',
        kind: 'message',
        status: 'running',
        attempt: 1,
        usage,
        totalUsage: usage,
        updatedAt: Date.now(),
      },
    ],
  },
  { agentId, conversationId },
);
process.stdout.write('ready\n');
// Up until killed: the store's lease timer is unref'd, so hold the process open.
setInterval(() => {}, 1 << 30);
