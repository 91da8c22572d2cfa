// A parent agent and its subagent, both on openaiModel, for the supervisor
// tests. The parent runs on the supervisor thread, the subagent in a worker;
// each constructs its model when this module is evaluated in its thread, from
// the environment of that thread: import it after setting the variable, and
// start the pool after that (a worker copies the environment when it starts).
import { defineAgent } from '@troupe/core';
import { openaiModel } from '@troupe/openai';
import { BASE_URL_VARIABLE } from './openaiAgents.js';

const baseURL = process.env[BASE_URL_VARIABLE] ?? 'http://127.0.0.1:9/v1';

/** The model names the server sees (each request says whose it is). */
export const LEAD_MODEL = 'lead-model';
export const HELPER_MODEL = 'helper-model';

/** The subagent: streams its answer; two attempts per call, no backoff. */
export const helper = defineAgent({
  name: 'helper',
  description: 'Answers a question',
  module: import.meta.url,
  instructions: 'Answer the question.',
  model: openaiModel({ model: HELPER_MODEL, baseURL, apiKey: 'sk-helper', maxAttempts: 2, backoffBaseMs: 0 }),
});

/** The parent: delegates to `helper` with the `task` tool; two attempts per call, no backoff. */
export const lead = defineAgent({
  name: 'lead',
  module: import.meta.url,
  instructions: 'Delegate to the helper.',
  subagents: [helper],
  model: openaiModel({ model: LEAD_MODEL, baseURL, apiKey: 'sk-lead', maxAttempts: 2, backoffBaseMs: 0 }),
});
