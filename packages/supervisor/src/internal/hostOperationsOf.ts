import type { LoopState, TaskResult, ToolCallId } from '@troupe/core';
import {
  encodeError,
  type HostCheckpoint,
  type HostEvent,
  type HostTaskResult,
  NO_APPROVAL_HANDLER,
} from '@troupe/core/internal';
import type { Durability } from '../persistence/Durability.js';
import type { HostOperations } from '../RunTransport.js';
import type { RequestBook } from './Requests.js';
import type { RunEvents } from './RunEvents.js';
import type { RunNode } from './RunNode.js';

/** What the host operations of a run reach in the run tree. */
export interface RunHostView {
  readonly events: RunEvents;
  readonly requests: RequestBook;
  readonly durability: Durability | undefined;
  /** Run a nested `task` call of `node` (a child node). */
  runTask(node: RunNode, request: Parameters<HostOperations['task']>[0]): Promise<TaskResult>;
  /** A checkpoint of a running node: its tokens so far, and the turn a lost attempt resumes from. */
  checkpointed(node: RunNode, state: LoopState, started: readonly string[]): void;
}

/** What the book's approval handler is called with: it passes the host's handler a signal of its own. */
const UNUSED_OPTIONS = Object.freeze({ signal: new AbortController().signal });

/**
 * The host channel's view of a run: the operations its worker may ask of the
 * supervisor (approval, a nested task, its events, a checkpoint), served by
 * the run tree for the run the attempt's capability names — never for what a
 * worker says about itself. Every transport serves these same operations (a
 * remote one relays them here).
 */
export function hostOperationsOf(node: RunNode, view: RunHostView): HostOperations {
  const approval = view.requests.approvalFor(node);
  return {
    agentId: node.agentId,
    runId: node.id,
    approve: (request) => {
      if (approval === undefined) return Promise.resolve({ decision: 'reject', reason: NO_APPROVAL_HANDLER });
      return Promise.resolve(
        approval(
          {
            toolName: request.toolName,
            toolCallId: request.toolCallId as ToolCallId,
            arguments: request.arguments,
            agentId: node.agentId,
            parentAgentId: node.parent?.agentId,
          },
          UNUSED_OPTIONS,
        ),
      );
    },
    task: async (request) => {
      const result = await view.runTask(node, request);
      // A cancelled run's worker stopped waiting (its call lost the race with the cancel).
      if (node.cancelled !== undefined || node.phase !== 'running') return undefined;
      return encodeTaskResult(result);
    },
    events: (events) => workerEvents(node, events, view),
    checkpoint: async (p: HostCheckpoint) => {
      const d = view.durability;
      // Offered only with a durable store; a worker asking without one gets nothing saved.
      if (d === undefined || !d.durable) return true;
      const state = p.state as unknown as LoopState;
      view.checkpointed(node, state, p.phase === 'before' ? p.calls.map((c) => c.id) : []);
      if (p.phase === 'before') await d.beforeCalls(node, state, p.calls);
      else
        await d.afterTurn(
          node,
          state,
          p.calls.map((c) => c.id),
        );
      return true;
    },
  };
}

// A batch of a worker's events, in order: telemetry and deltas to the host, questions to the book.
function workerEvents(node: RunNode, events: readonly HostEvent[], view: RunHostView): void {
  for (const e of events) {
    switch (e[0]) {
      case 't':
        view.events.telemetry(node, e[1], e[2]);
        break;
      case 'd':
        view.events.deltas(node, e[1]);
        break;
      case 'q':
        view.requests.question(node, e[1], e[2]);
        break;
    }
  }
}

/** A task result for the worker that asked (errors as shapes). */
function encodeTaskResult(result: TaskResult): HostTaskResult {
  switch (result.status) {
    case 'done':
      return {
        status: 'done',
        result: result.result,
        ...(result.output === undefined ? {} : { output: result.output }),
        events: [...result.events],
        ...(result.updates === undefined ? {} : { updates: [...result.updates] }),
        ...(result.usage === undefined ? {} : { usage: result.usage }),
      };
    case 'suspended':
      return { status: 'suspended', request: result.request };
    case 'error':
      return {
        status: 'error',
        error: encodeError(result.error),
        events: [...result.events],
        ...(result.usage === undefined ? {} : { usage: result.usage }),
      };
  }
}
