// A one-file program (run by entryScript.test.ts): its agents are defined in this script itself
// (`module: import.meta.url`) and it awaits the supervisor at top level. A worker imports this
// file to find the agents; the main thread must not (the import would wait for this script's own
// top-level await: `spawn` exited 13 with nothing printed, a parent's task hung).
import { isMainThread } from 'node:worker_threads';
import { defineAgent } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import { createSupervisor } from '@troupe/supervisor';

export const helper = defineAgent({
  name: 'helper',
  module: import.meta.url,
  instructions: 'Help.',
  model: new ScriptedModel(['helped']),
});

export const boss = defineAgent({
  name: 'boss',
  module: import.meta.url,
  instructions: 'Delegate.',
  subagents: [helper],
  model: new ScriptedModel([
    { toolCalls: [{ name: 'task', arguments: { subagent: 'helper', instructions: 'go' } }] },
    ({ lastToolResults }) => `boss got ${String(lastToolResults[0]?.content)}`,
  ]),
});

if (isMainThread) {
  const supervisor = createSupervisor({ pool: { threads: 1 }, persistence: null });
  const spawned = await supervisor.spawn(helper, { input: 'go', scope: {} });
  console.log(`spawn: ${spawned.status} ${spawned.status === 'done' ? spawned.result : ''}`);
  const agent = await supervisor.startAgent(boss, { scope: {} });
  const reply = await agent.send('go');
  console.log(`task: ${reply.status} ${reply.status === 'done' ? reply.text : ''}`);
  await supervisor.close();
}
