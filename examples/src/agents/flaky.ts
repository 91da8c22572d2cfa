// A subagent with a bug that takes its worker thread down.
import { defineAgent, defineTool } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import { z } from 'zod';

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
  instructions: 'Export the report.',
  tools: [exportReport],
  model: new ScriptedModel([{ toolCalls: [{ name: 'export_report' }] }, 'exported']),
});
