import type { Agent, AgentId, CancelReason, LoopState, RunId, Scope, TaskResult, ToolCallId } from '@troupe/core';
import {
  encodeError,
  type HostApprovalRequest,
  type HostCheckpoint,
  type HostEvent,
  type HostTaskRequest,
  type HostTaskResult,
  NO_APPROVAL_HANDLER,
} from '@troupe/core/internal';
import type { Durability } from '../persistence/Durability.js';
import type { Attempt, AttemptPlacement, AttemptWork, HostOperations } from '../RunTransport.js';
import type { RequestBook } from './Requests.js';
import type { RunEvents } from './RunEvents.js';
import type { RunNode } from './RunNode.js';

/** What an attempt's host operations reach in the run tree. */
export interface RunHostView {
  readonly events: RunEvents;
  readonly requests: RequestBook;
  readonly durability: Durability | undefined;
  /** Run a nested `task` call of `node` (a child node). */
  runTask(node: RunNode, request: HostTaskRequest): Promise<TaskResult>;
  /** A checkpoint of a running node: its tokens so far, and the turn a lost attempt resumes from. */
  checkpointed(node: RunNode, state: LoopState, started: readonly string[]): void;
  /** A slot took the node's attempt `attempt`. */
  placed(node: RunNode, attempt: number, placement: AttemptPlacement): void;
}

/** What the book's approval handler is called with: it passes the host's handler a signal of its own. */
const UNUSED_OPTIONS = Object.freeze({ signal: new AbortController().signal });

/**
 * One attempt of a run as the tree hands it to a transport, and the host
 * operations its worker is served — the host channel's view of the run:
 * approval, a nested task, its events, a checkpoint, for the run the
 * attempt's capability names (never for what a worker says about itself).
 * Every transport serves these same operations (a remote one relays them
 * here). One object per dispatch, its operations on the prototype: this is
 * made for every spawn.
 */
export class RunAttempt implements Attempt, HostOperations {
  readonly runId: RunId;
  readonly attempt: number;
  readonly capability: string;
  readonly agentId: AgentId;
  readonly parentAgentId: AgentId | undefined;
  readonly agent: Agent;
  readonly scope: Scope;
  readonly toolContext: Readonly<Record<string, unknown>>;
  readonly work: AttemptWork;
  readonly timeoutMs: number | undefined;
  readonly features: number;
  readonly cancelled: CancelReason | undefined;
  readonly host: HostOperations;
  readonly #node: RunNode;
  readonly #view: RunHostView;

  constructor(
    node: RunNode,
    view: RunHostView,
    dispatch: {
      readonly capability: string;
      readonly work: AttemptWork;
      readonly timeoutMs: number | undefined;
      readonly features: number;
    },
  ) {
    this.runId = node.id;
    this.attempt = node.attempt;
    this.capability = dispatch.capability;
    this.agentId = node.agentId;
    this.parentAgentId = node.parent?.agentId;
    this.agent = node.agent;
    this.scope = node.scope;
    this.toolContext = node.toolContext;
    this.work = dispatch.work;
    this.timeoutMs = dispatch.timeoutMs;
    this.features = dispatch.features;
    this.cancelled = node.cancelled;
    this.host = this;
    this.#node = node;
    this.#view = view;
  }

  placed(placement: AttemptPlacement): void {
    this.#view.placed(this.#node, this.attempt, placement);
  }

  approve(request: HostApprovalRequest): Promise<unknown> {
    const node = this.#node;
    const approval = this.#view.requests.approvalFor(node);
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
  }

  async task(request: HostTaskRequest): Promise<HostTaskResult | undefined> {
    const node = this.#node;
    const result = await this.#view.runTask(node, request);
    // A cancelled run's worker stopped waiting (its call lost the race with the cancel).
    if (node.cancelled !== undefined || node.phase !== 'running') return undefined;
    return encodeTaskResult(result);
  }

  // A batch of a worker's events, in order: telemetry and deltas to the host, questions to the book.
  events(events: readonly HostEvent[]): void {
    const node = this.#node;
    const view = this.#view;
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

  async checkpoint(p: HostCheckpoint): Promise<unknown> {
    const d = this.#view.durability;
    // Offered only with a durable store; a worker asking without one gets nothing saved.
    if (d === undefined || !d.durable) return true;
    const node = this.#node;
    const state = p.state as unknown as LoopState;
    this.#view.checkpointed(node, state, p.phase === 'before' ? p.calls.map((c) => c.id) : []);
    if (p.phase === 'before') await d.beforeCalls(node, state, p.calls);
    else
      await d.afterTurn(
        node,
        state,
        p.calls.map((c) => c.id),
      );
    return true;
  }
}

/**
 * A task result for the worker that asked: the result as it is, its error (if
 * it has one) as a shape, the one field an `Error` cannot cross as. The rest is
 * plain data the worker checks with the `HostTaskResult` schema.
 */
function encodeTaskResult(result: TaskResult): HostTaskResult {
  // The schema's type differs from TaskResult only in its arrays not being readonly.
  return (result.status === 'error' ? { ...result, error: encodeError(result.error) } : result) as HostTaskResult;
}
