// Two CPU-bound subagents: one whose tool never yields (only the watchdog can
// stop it) and one whose tool is polite (it reads its cancellation flag in
// its hot loop, one Atomics.load per check).
import { defineAgent, defineTool } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import { z } from 'zod';
import { demoModel } from './model.js';
import { bump, Probe, type ProbeContext } from './probe.js';

/** The runaway tool's own timeout: the watchdog kills its worker this long (plus the pool's grace) after it starts. */
export const CRUNCH_TIMEOUT_MS = 100;

// A catastrophic-backtracking regex (ReDoS): 2^40 steps inside one call into
// the regex engine. No `await`, no check: cooperation cannot reach it.
const RUNAWAY = /^(a+)+$/;

const validateInput = defineTool({
  name: 'validate_input',
  description: 'Validate a form field with a (badly written) regular expression',
  parameters: z.object({ value: z.string() }),
  timeoutMs: CRUNCH_TIMEOUT_MS,
  execute: ({ value }, ctx: ProbeContext) => {
    bump(ctx, Probe.crunchStarted);
    return RUNAWAY.test(value);
  },
});

const callOnce = (name: string, args: unknown) =>
  new ScriptedModel([
    { toolCalls: [{ name, arguments: args }] },
    ({ lastToolResults }) => JSON.stringify(lastToolResults[0]?.content),
  ]);

/** Validates a hostile input: its tool never returns. Always scripted: the input is hostile on purpose. */
export const validator = defineAgent({
  name: 'validator',
  description: 'Validates user input',
  module: import.meta.url,
  instructions: 'Validate the input.',
  tools: [validateInput],
  model: callOnce('validate_input', { value: `${'a'.repeat(40)}!` }),
});

const sumPrimes = defineTool({
  name: 'sum_primes',
  description: 'Sum primes until told to stop',
  parameters: z.object({}),
  timeoutMs: null,
  execute: (_args, ctx: ProbeContext) => {
    bump(ctx, Probe.pollStarted);
    let sum = 0;
    let n = 2;
    // The check is one Atomics.load of this run's slot in the shared table:
    // cheap enough for every iteration of a hot loop.
    while (!ctx.isCancelled()) {
      let prime = true;
      for (let d = 2; d * d <= n; d++) {
        if (n % d === 0) {
          prime = false;
          break;
        }
      }
      if (prime) sum += n;
      n++;
    }
    bump(ctx, Probe.pollNoticed);
    // Stop with the cancellation's own error (an interruption, not a failure).
    ctx.throwIfCancelled();
    return sum;
  },
});

/** Crunches numbers until cancelled, checking `ctx.isCancelled()` on every iteration. */
export const cruncher = defineAgent({
  name: 'cruncher',
  description: 'Crunches numbers until cancelled',
  module: import.meta.url,
  instructions: 'Call sum_primes once, then answer with its result.',
  tools: [sumPrimes],
  model: demoModel(callOnce('sum_primes', {}), { temperature: 0 }),
});
