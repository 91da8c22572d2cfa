import type { LoopState } from '@troupe/core';
import type { RunTree } from '../RunTree.js';
import type { SubagentOutcome } from '../SubagentOutcome.js';
import { type RunNode, totalOf } from './RunNode.js';

/**
 * A direct spawn's tree as its outcome, the one public result of a spawn on
 * every path (`spawn()`, and `answer()` of its question): derived from the
 * root's {@link RunEnd} here only (literals, not spreads: this runs for every
 * spawn).
 */
export function spawnOutcome(root: RunNode, tree: RunTree): SubagentOutcome {
  const agentId = root.agentId;
  const runId = root.id;
  const usage = root.usage;
  const totalUsage = totalOf(root);
  if (root.phase !== 'ended') {
    const first = tree.requests.firstOpen(root);
    const state = root.state as LoopState;
    return {
      agentId,
      runId,
      usage,
      totalUsage,
      status: 'suspended',
      request: first?.request ?? { id: '', kind: 'none', prompt: '' },
      state,
      events: state.events,
      turns: state.turns,
    };
  }
  const end = root.end;
  switch (end?.status) {
    case 'done':
      return end.output === undefined
        ? {
            agentId,
            runId,
            usage,
            totalUsage,
            status: 'done',
            result: end.text,
            updates: end.updates,
            events: end.events,
            turns: end.turns,
          }
        : {
            agentId,
            runId,
            usage,
            totalUsage,
            status: 'done',
            result: end.text,
            output: end.output,
            updates: end.updates,
            events: end.events,
            turns: end.turns,
          };
    case 'failed':
      return {
        agentId,
        runId,
        usage,
        totalUsage,
        status: 'failed',
        error: end.error,
        events: end.events,
        turns: end.turns,
      };
    case 'incomplete':
      return { agentId, runId, usage, totalUsage, status: 'incomplete', events: end.events, turns: end.turns };
    case 'crashed':
      return { agentId, runId, usage, totalUsage, status: 'crashed', error: end.error, exitCode: end.exitCode };
    case 'cancelled':
      return { agentId, runId, usage, totalUsage, status: 'cancelled', reason: end.reason, forced: end.forced };
    default:
      return { agentId, runId, usage, totalUsage, status: 'cancelled', reason: 'shutdown', forced: false };
  }
}
