// A program (run by runTree.test.ts, item 13): a parent agent whose tool never
// settles and times out after 100 ms. Nothing but the run keeps this process
// alive while `send` is pending: if nothing held it, Node would exit 13
// (an unsettled top-level await) before the timeout fired.
import { createSupervisor } from '@troupe/supervisor';
import { timesOut } from '../fixtures/agents/lifecycle.js';

const supervisor = createSupervisor({ pool: { threads: 1 }, persistence: null });
const agent = await supervisor.startAgent(timesOut, { scope: {} });
const reply = await agent.send('go');
console.log(reply.status === 'done' ? reply.text : reply.status);
await supervisor.close();
