// A subagent that writes prose, the one whose tokens the demo streams: its
// model is the OpenAI-compatible server TROUPE_MODEL_BASE_URL names (see
// `demoModel`), built in the worker that runs it. Without one the demo skips
// the scene; its script only says so.
import { defineAgent } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import { demoModel } from './model.js';

/** Writes the short paragraph its task asks for, in plain text. No tools. */
export const writer = defineAgent({
  name: 'writer',
  description: 'Writes a short paragraph',
  module: import.meta.url,
  instructions:
    'You write for engineers. Answer in plain text (no markdown, no lists), in at most three short sentences, using only the figures you are given.',
  model: demoModel(ScriptedModel.answering('(no model: set TROUPE_MODEL_BASE_URL and TROUPE_MODEL)'), {
    temperature: 0.2,
  }),
});
