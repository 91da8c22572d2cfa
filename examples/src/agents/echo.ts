// The smallest subagent: no tools, one turn. The demo runs it once per thread
// to boot the pool before measuring anything.
import { defineAgent } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import { lastUserMessage } from './lastUserMessage.js';

/** Answers with its task. */
export const echo = defineAgent({
  name: 'echo',
  description: 'Repeats its task',
  module: import.meta.url,
  instructions: 'Repeat the task.',
  model: new ScriptedModel([({ messages }) => lastUserMessage(messages)], { whenExhausted: 'repeat-last' }),
});
