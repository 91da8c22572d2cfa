// Hostile-checker finding: defineTool takes `requiresApproval` of any type and keeps only
// `=== true`: a tool declared `requiresApproval: 'true'` or `1` (from a config file, from
// JavaScript) silently runs WITHOUT approval — fail-open — while every other option of
// defineTool (retries, timeoutMs, name, parameters, execute) is checked with a typed error.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { defineTool, InvalidArgumentError } from '@troupe/core';
import { z } from 'zod';

it('defineTool refuses a requiresApproval that is not a boolean (or keeps the gate): never fails open', () => {
  for (const requiresApproval of ['true', 'yes', 1]) {
    let tool: { readonly requiresApproval: boolean } | undefined;
    let thrown: unknown;
    try {
      tool = defineTool({
        name: 'drop_table',
        description: 'Drop a table',
        parameters: z.object({ table: z.string() }),
        requiresApproval: requiresApproval as unknown as boolean,
        execute: ({ table }) => `dropped ${table}`,
      });
    } catch (error) {
      thrown = error;
    }
    assert.ok(
      thrown instanceof InvalidArgumentError || tool?.requiresApproval === true,
      `requiresApproval: ${JSON.stringify(requiresApproval)} made a tool that runs without approval`,
    );
  }
});
