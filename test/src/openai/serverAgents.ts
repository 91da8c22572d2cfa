// Agents on openaiModel for the tests against a chat server on 127.0.0.1. Each thread builds its
// models when it evaluates this module, from its environment: set
// TROUPE_TEST_CHAT_BASE_URL before importing it and before the pool starts.
import { defineAgent, defineTool } from '@troupe/core';
import { openaiModel } from '@troupe/openai';
import { z } from 'zod';

export const BASE_URL_VARIABLE = 'TROUPE_TEST_CHAT_BASE_URL';
/** The key every model here sends: it must never show in an error, an event or a span. */
export const SECRET_KEY = 'sk-troupe-SECRET-7731';

const baseURL = process.env[BASE_URL_VARIABLE] ?? 'http://127.0.0.1:9/v1';
const model = (name: string) =>
  openaiModel({ model: name, baseURL, apiKey: SECRET_KEY, maxAttempts: 1, backoffBaseMs: 0 });

/** Receives what the model asked for, exactly (the test reads it back from the result). */
const record = defineTool({
  name: 'record',
  description: 'Record a note',
  parameters: z.object({ note: z.string(), tags: z.array(z.string()) }),
  execute: ({ note, tags }) => ({ note, tags }),
});

/** A subagent (a worker) that calls `record` when its model says so. */
export const worker = defineAgent({
  name: 'fc-worker',
  description: 'Records notes',
  module: import.meta.url,
  instructions: 'Record the note.',
  tools: [record],
  model: model('worker-model'),
});

/** A parent (the supervisor thread) that delegates to `worker`. */
export const lead = defineAgent({
  name: 'fc-lead',
  module: import.meta.url,
  instructions: 'Delegate to fc-worker.',
  subagents: [worker],
  model: model('lead-model'),
});
