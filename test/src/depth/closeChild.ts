// A process that starts a deep tree (a stalled model stream, a tool that never
// yields, a tool that waits for cancellation, a question) and then closes its
// supervisor with a short timeout. It prints lines the test waits on, and must
// exit by itself once close resolves.
import { createSupervisor } from '@troupe/supervisor';
import { EventLog } from '../supervisor/EventLog.js';
import { PlanServer } from './planServer.js';

const server = await PlanServer.start();
process.env.DEEP_BASE_URL = server.baseURL;
const { d0, d1 } = await import('../fixtures/agents/deepOpenai.js');
const supervisor = createSupervisor({ persistence: null, pool: { threads: 6, graceMs: 200 } });
const log = new EventLog(supervisor);
await supervisor.ready();
const agent = await supervisor.startAgent(d0, { scope: {} });
const plan = {
  label: 'r',
  kind: 'delegate',
  children: [
    {
      label: 'a',
      kind: 'delegate',
      children: [
        { label: 'hang', kind: 'answer', fail: 'hang' },
        { label: 'busy', kind: 'tool', tool: 'busy' },
        { label: 'spin', kind: 'delegate', children: [{ label: 'spin3', kind: 'tool', tool: 'spin' }] },
      ],
    },
  ],
};
const id = agent.id;
const started = Promise.all([
  log.whenNamed('model.delta', (e) => e.agentId === `${id}-sub-1-sub-1`),
  log.whenNamed('tool.execute.start', (e) => e.agentId === `${id}-sub-1-sub-2` && e.toolName === 'busy'),
  log.whenNamed('tool.execute.start', (e) => e.agentId === `${id}-sub-1-sub-3-sub-1` && e.toolName === 'spin'),
]);
const reply = agent.send(JSON.stringify(plan));
const spawned = supervisor.spawn(d1, {
  input: JSON.stringify({ label: 'direct', kind: 'tool', tool: 'spin' }),
  scope: {},
});
await started;
await log.whenNamed('tool.execute.start', (e) => e.toolName === 'spin' && !String(e.agentId).startsWith(id));
console.log('STARTED');
const t0 = performance.now();
await supervisor.close({ timeoutMs: 300 });
const closedIn = performance.now() - t0;
const [r, s] = await Promise.all([reply, spawned]);
console.log(`CLOSED ${Math.round(closedIn)} reply=${r.status} spawn=${s.status} runs=${supervisor.stats().runs}`);
const lateAfterClose = log.entries.length;
await server.close();
setImmediate(() => {
  console.log(`LATE ${log.entries.length - lateAfterClose}`);
});
