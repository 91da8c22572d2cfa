// A subagent that runs on a worker thread: it inspects one service and
// reports what it saw of the three context channels.
import { threadId } from 'node:worker_threads';
import { ContextUpdate, defineAgent, defineTool, type ScopeOf, type ToolContext, ToolResult } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import { z } from 'zod';
import type { TenantScope } from '../scope.js';
import { lastUserMessage } from './lastUserMessage.js';
import { demoModel } from './model.js';
import { sharedNow } from './probe.js';

/** What the analyst's tool saw and found: plain data, because it crosses back to the supervisor thread. */
export interface Inspection {
  readonly service: string;
  readonly errors: number;
  readonly agentId: string;
  readonly parentAgentId: string | null;
  readonly threadId: number;
  /** From `ctx.scope`. */
  readonly tenantId: string;
  /** A `toolContext` key, read flat from the context. */
  readonly region: string;
  /** The same `toolContext`, whole. */
  readonly requestId: string;
  /** From the metadata snapshot the child started with. */
  readonly incident: string;
  /** Epoch ms, in the base every thread shares (`sharedNow`). */
  readonly startedAt: number;
  readonly endedAt: number;
}

/** What the analyst's tool reads: the tenant scope, and `region` and `requestId` from the host's toolContext. */
type AnalystContext = ToolContext<
  ScopeOf<typeof TenantScope>,
  { readonly region?: string; readonly requestId: string }
>;

// About 100 ms of work on a 2020s core: long enough for the workers' runs to overlap visibly
// and for a speed-up to stand above the noise of a shared machine.
const LINES = 60_000_000;

/**
 * Count the error lines of a synthetic log: deterministic, CPU-bound (no
 * await inside). The demo also runs it on its own event loop, and on bare
 * worker threads, to compare.
 */
export function countErrors(service: string): number {
  let seed = 2166136261;
  for (let i = 0; i < service.length; i++) seed = Math.imul(seed ^ service.charCodeAt(i), 16777619);
  let errors = 0;
  for (let i = 0; i < LINES; i++) {
    seed = Math.imul(seed ^ i, 16777619) >>> 0;
    if (seed % 9973 < 1 + (service.length % 3)) errors++;
  }
  return errors;
}

/** The analyst's tool: count a service's errors, and report what the tool saw of its context. */
export const inspectLogs = defineTool({
  name: 'inspect_logs',
  description: "Count the errors in a service's recent logs",
  parameters: z.object({ service: z.string().min(1) }),
  execute: ({ service }, ctx: AnalystContext) => {
    const startedAt = sharedNow();
    const errors = countErrors(service);
    const inspection: Inspection = {
      service,
      errors,
      agentId: ctx.agentId,
      parentAgentId: ctx.parentAgentId ?? null,
      threadId,
      tenantId: ctx.scope.tenantId,
      region: String(ctx.region),
      requestId: ctx.toolContext.requestId,
      incident: String(ctx.state.metadata.incident),
      startedAt,
      endedAt: sharedNow(),
    };
    // The child's metadata change; it reaches the parent only because the
    // parent lists this agent in `mergeMetadataFrom`.
    return ToolResult.ok(
      inspection,
      ContextUpdate.empty().append('findings', { service, errors }).logEvent('inspected', { service, errors }),
    );
  },
});

/** Inspects the service named by its task and answers with the inspection as JSON. */
export const analyst = defineAgent({
  name: 'analyst',
  description: 'Inspects one service',
  module: import.meta.url,
  instructions:
    'Call inspect_logs once with the service you are given, then answer with only the JSON the tool returned.',
  tools: [inspectLogs],
  model: demoModel(
    new ScriptedModel([
      ({ messages }) => ({ toolCalls: [{ name: 'inspect_logs', arguments: { service: lastUserMessage(messages) } }] }),
      ({ lastToolResults }) => JSON.stringify(lastToolResults[0]?.content),
    ]),
    { temperature: 0 },
  ),
});
