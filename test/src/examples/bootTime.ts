// An agent whose answer is when its worker thread finished booting — in the
// process-wide performance clock, which every thread shares.
import { performance } from 'node:perf_hooks';
import { defineAgent } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';

/** Answers with the epoch ms at which its worker thread finished bootstrapping. */
export const bootTime = defineAgent({
  name: 'bootTime',
  module: import.meta.url,
  instructions: 'Say when your thread booted.',
  model: new ScriptedModel([() => String(performance.timeOrigin + performance.nodeTiming.bootstrapComplete)], {
    whenExhausted: 'repeat-last',
  }),
});
