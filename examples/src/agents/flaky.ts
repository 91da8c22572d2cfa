// A subagent with a bug that takes its worker thread down.
import { defineAgent, defineTool } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import { z } from 'zod';
import { demoModel } from './model.js';

const exportReport = defineTool({
  name: 'export_report',
  description: 'Export a report',
  parameters: z.object({}),
  // An exception thrown from a callback escapes every try/catch: it is
  // uncaught at the worker's top level and the worker dies (a defect).
  execute: () =>
    new Promise(() => {
      setImmediate(() => {
        throw new Error('bug: cannot read properties of undefined (reading "rows")');
      });
    }),
});

/** Exports a report; its tool crashes its worker. */
export const exporter = defineAgent({
  name: 'exporter',
  description: 'Exports reports',
  module: import.meta.url,
  instructions: 'Call export_report once, then answer "exported".',
  tools: [exportReport],
  model: demoModel(new ScriptedModel([{ toolCalls: [{ name: 'export_report' }] }, 'exported']), { temperature: 0 }),
});
