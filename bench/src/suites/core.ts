import type { AgentId } from '@troupe/core';
import { ContextUpdate, createId, reduceMetadata, sealScope } from '@troupe/core';
import { buildToolContext, localRunCancellation, type RunContext } from '@troupe/core/internal';
import type { Figure, SuiteBody } from '../Suite.js';
import { median, quantile, round, timeSync } from '../stats.js';

/** Pure @troupe/core costs on the hot path of every tool call. */
export const coreSuite: SuiteBody = {
  async run({ quick, progress }) {
    const batches = quick ? 30 : 200;
    const perBatch = quick ? 2_000 : 10_000;
    const scope = sealScope({ userId: 'u_1', orgId: 'o_1', role: 'admin' });
    const toolContext = Object.freeze({
      featureFlags: Object.freeze({ newSearch: true }),
      requestId: 'req-1',
      tenantName: 'Acme',
    });
    const run: RunContext = { scope, toolContext, agentId: 'agent_a' as AgentId, parentAgentId: undefined };
    const cancellation = localRunCancellation();
    const state = { agentId: run.agentId, messages: [], todos: [], metadata: Object.freeze({ title: 'chat' }) };
    const callId = createId('call');
    progress('core: tool context build');
    const build = timeSync(
      () =>
        buildToolContext(run, {
          state,
          toolCallId: callId,
          toolName: 'search',
          attempt: 1,
          deadline: undefined,
          timeoutMs: undefined,
          answer: undefined,
          token: cancellation.token,
        }),
      { batches, perBatch },
    );

    progress('core: context update fold');
    const initial = Object.freeze({
      existing: Object.freeze([0]),
      counter: 1,
      settings: Object.freeze({ a: Object.freeze({ b: 1 }) }),
    });
    const update = ContextUpdate.empty()
      .append('new', 'first')
      .set('counter', 5)
      .merge('settings', { a: { c: 2 } })
      .append('existing', 1)
      .delete('existing')
      .append('existing', 'restored')
      .append('new', 'second')
      .merge('settings', { d: 3 })
      .set('replaced', [10])
      .set('replaced', [10, 11, 12]);
    const ops = update.operations;
    const fold = timeSync(() => reduceMetadata(initial, ops), { batches, perBatch });
    const figure = (name: string, samples: number[]): Figure => ({
      suite: 'core',
      name,
      value: round(median(samples)),
      unit: 'ns',
      detail: { p95: round(quantile(samples, 0.95)), batches: samples.length },
    });
    return [figure('core.tool_context_build_ns', build), figure('core.context_update_10ops_ns', fold)];
  },
};
