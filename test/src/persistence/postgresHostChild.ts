// An API host on a shared PostgreSQL database: its own supervisor and store, driven by env.
//
//   HOST_URL=<url> HOST_SCHEMA=<schema> HOST_LEASE_MS=<ms> HOST_EFFECTS=<log> HOST_SECRET=<s>
//   HOST_ACTION=<action> HOST_ARG=<agent id or request id> node postgresHostChild.js
//
// Actions (one line on stdout per fact):
// - `suspend`: start conversation HOST_ARG, send "root" (its tool asks): `suspended <requestId>`, then
//   stays up (its lease renewed) until killed.
// - `answer-and-hold`: answer request HOST_ARG (restoring its conversation from the store); the re-run
//   tool does its side effect, says `in-effect` and never returns (the test kills the host there:
//   mid-answer, inside a tool call).
// - `send-on-signal`: start conversation HOST_ARG (its saved state loaded): `loaded`; on SIGUSR2 send
//   "from A": `replied <status> <error code or ->`, then exits.
// - `answer`: answer request HOST_ARG (restoring its conversation from the store): `answered <status>`
//   or `refused <code>`; then exits.
import { isTroupeError, type Request } from '@troupe/core';
import { postgresPersistence } from '@troupe/postgres';
import { createSupervisor } from '@troupe/supervisor';
import { depot } from '../fixtures/agents/crashWindow.js';

const env = process.env;
const action = env.HOST_ACTION as string;
const arg = env.HOST_ARG as string;
const scope = { org: 'acme', userId: 'host', secret: env.HOST_SECRET as string };
const store = await postgresPersistence({
  connectionString: env.HOST_URL as string,
  schema: env.HOST_SCHEMA as string,
  leaseMs: Number(env.HOST_LEASE_MS),
  tenantKey: (s) => (s as { org: string }).org,
});
const supervisor = createSupervisor({ agents: [depot], persistence: store, pool: { threads: 1, graceMs: 100 } });
const say = (line: string) => process.stdout.write(`${line}\n`);

if (action === 'suspend') {
  const agent = await supervisor.startAgent(depot, { scope, agentId: arg, toolContext: { effects: env.HOST_EFFECTS } });
  const reply = await agent.send('root');
  if (reply.status !== 'suspended') throw new Error(`expected a question, got ${JSON.stringify(reply)}`);
  const request = (reply as { request: Request }).request;
  say(`suspended ${request.id}`);
  // Up until killed: the supervisor's pool and the store's lease keep the process alive.
} else if (action === 'answer-and-hold') {
  await supervisor.answer(
    arg,
    { ok: true },
    { scope, toolContext: { effects: env.HOST_EFFECTS, holdAfterEffect: true } },
  );
} else if (action === 'send-on-signal') {
  const agent = await supervisor.startAgent(depot, { scope, agentId: arg, toolContext: { effects: env.HOST_EFFECTS } });
  process.once('SIGUSR2', async () => {
    const reply = await agent.send('from A');
    say(`replied ${reply.status} ${reply.status === 'failed' ? (reply.error as { code?: string }).code : '-'}`);
    await supervisor.close();
  });
  say('loaded');
} else if (action === 'answer') {
  try {
    const reply = await supervisor.answer(arg, { ok: true }, { scope, toolContext: { effects: env.HOST_EFFECTS } });
    say(`answered ${reply.status}`);
  } catch (error) {
    say(`refused ${isTroupeError(error) ? error.code : String(error)}`);
  }
  await supervisor.close();
} else {
  throw new Error(`unknown HOST_ACTION ${action}`);
}
