// The parent of the HITL round trip: delegates to `asker`, whose tool asks a person.
import { defineAgent } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import { asker } from './overhead.js';

export const hitlLead = defineAgent({
  name: 'hitlLead',
  module: import.meta.url,
  instructions: 'Delegate the question.',
  subagents: [asker],
  model: new ScriptedModel([
    { toolCalls: [{ name: 'task', arguments: { subagent: 'asker', instructions: 'ask' } }] },
    'resumed',
  ]),
});
