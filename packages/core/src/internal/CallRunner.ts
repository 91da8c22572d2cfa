import type { SessionEvent } from '../ContextUpdate.js';
import { executeTool, type ToolExecution } from '../executeTool.js';
import type { ToolCallId } from '../Id.js';
import type { LoopState, PendingCall } from '../LoopState.js';
import type { ModelToolCall } from '../Model.js';
import type { Answer } from '../Request.js';
import { createTaskTool } from '../TaskTool.js';
import type { AnyTool } from '../Tool.js';
import type { AgentStateView } from '../ToolContext.js';
import type { ToolSpec } from '../ToolSpec.js';
import { TroupeError } from '../TroupeError.js';
import type { Usage } from '../Usage.js';
import { type CallResult, toCallResult } from './CallResult.js';
import type { RunAgentLoopOptions } from './RunAgentLoopOptions.js';
import { type ToolIndex, toolIndexOf } from './ToolIndex.js';
import type { CheckpointCall, TurnCheckpoints } from './TurnCheckpoints.js';

// The child maps of a run that cannot delegate: never written (see CallRunner).
const NO_CHILD_EVENTS = new Map<string, readonly SessionEvent[]>();
const NO_CHILD_USAGE = new Map<string, Usage>();

// Every call of a turn sees the same state: one view per state, not one per call.
const stateViews = new WeakMap<LoopState, AgentStateView>();

function stateView(state: LoopState): AgentStateView {
  let view = stateViews.get(state);
  if (view === undefined) {
    view = { agentId: state.agentId, messages: state.messages, todos: state.todos, metadata: state.metadata };
    stateViews.set(state, view);
  }
  return view;
}

/**
 * What one run needs to execute its turns' tool calls, made once per run:
 * the agent's tool index, the run's task tool, the child events and usage
 * its `task` calls deliver until their turn completes, and its checkpoints.
 */
export class CallRunner {
  /** The tools offered to the model: the agent's, and the task tool when the run can delegate. */
  readonly specs: readonly ToolSpec[];
  /** The run's durable checkpoints, if it has any. */
  readonly checkpoints: TurnCheckpoints | undefined;
  readonly #options: RunAgentLoopOptions;
  readonly #index: ToolIndex;
  readonly #task: AnyTool | undefined;
  // Child events and usage delivered by `task` calls, by call id, until the turn completes.
  // Made only for a run that can delegate (only its task tool writes them; clearing an empty one is a no-op).
  readonly #childEvents: Map<string, readonly SessionEvent[]>;
  readonly #childUsage: Map<string, Usage>;

  constructor(options: RunAgentLoopOptions) {
    const agent = options.agent;
    this.#options = options;
    const spawner = agent.subagents.length > 0 ? options.spawner : undefined;
    const delegates = spawner !== undefined;
    const childEvents = delegates ? new Map<string, readonly SessionEvent[]>() : NO_CHILD_EVENTS;
    const childUsage = delegates ? new Map<string, Usage>() : NO_CHILD_USAGE;
    this.#childEvents = childEvents;
    this.#childUsage = childUsage;
    const index = toolIndexOf(agent);
    this.#index = index;
    // The task tool closes over this run's spawner; everything else is shared per agent.
    const task =
      spawner !== undefined
        ? createTaskTool(agent.subagents, spawner, (id, evs, usage) => {
            if (evs.length > 0) childEvents.set(id, evs);
            if (usage !== undefined) childUsage.set(id, usage);
          })
        : undefined;
    this.#task = task;
    this.specs = task === undefined ? index.specs : index.specsWithTask(task);
    this.checkpoints = options.checkpoints;
  }

  /** The run's tool of that name (the task tool included), if it has one. */
  toolNamed(name: string): AnyTool | undefined {
    const task = this.#task;
    return task !== undefined && name === task.name ? task : this.#index.byName.get(name);
  }

  /** The calls as a checkpoint records them before they run. */
  checkpointCalls(calls: readonly ModelToolCall[]): CheckpointCall[] {
    return calls.map((c) => ({ id: c.id, name: c.name, idempotent: this.toolNamed(c.name)?.idempotent === true }));
  }

  /**
   * Execute one call of a turn after `state`: a malformed call or an
   * unknown tool is an error result, never run; a question the run's own
   * tool asks is told to `onQuestion` at once (a `task` call's is its
   * child's, already asked). `answer` re-runs a suspended call with its
   * answer; with `approvalAnswer` it was an approval, and the call runs as
   * if first called (pre-approved if the supervisor says so).
   */
  async execute(
    state: LoopState,
    call: ModelToolCall,
    malformed: string | undefined,
    answer?: Answer,
    approvalAnswer = false,
  ): Promise<CallResult> {
    const options = this.#options;
    const tool = this.toolNamed(call.name);
    let execution: ToolExecution;
    if (malformed !== undefined) {
      execution = {
        status: 'error',
        error: new TroupeError(`malformed tool call: ${malformed}`, { code: 'ERR_TOOL_VALIDATION' }),
        kind: 'validation',
        update: undefined,
        attempts: 0,
      };
    } else if (tool === undefined) {
      execution = {
        status: 'error',
        error: new TroupeError(
          `unknown tool "${call.name}"; available: ${this.specs.map((t) => t.name).join(', ') || 'none'}`,
          {
            code: 'ERR_TOOL_UNKNOWN',
          },
        ),
        kind: 'unknown_tool',
        update: undefined,
        attempts: 0,
      };
    } else {
      execution = await executeTool(
        tool,
        { id: call.id as ToolCallId, arguments: call.arguments },
        {
          clock: options.clock,
          run: options.run,
          state: stateView(state),
          cancellation: options.cancellation,
          approval: options.approval,
          preApproved: approvalAnswer && options.approvedCalls?.has(call.id) === true,
          answer: approvalAnswer ? undefined : answer,
          events: options.events,
          toolIndex: this.#index.position.get(call.name),
          abandoned: options.abandoned,
        },
      );
    }
    const result = toCallResult(call, execution);
    if (result.request === undefined) return result;
    // A `task` call's question is its child's (already asked); the run's own tools ask now.
    if (tool === this.#task) return { ...result, delegated: true };
    options.onQuestion?.(call.id, result.request);
    return result;
  }

  /** A call of the turn with its result (or its question), and the child events and usage its `task` call delivered. */
  pendingOf(call: ModelToolCall, r: CallResult): PendingCall {
    return {
      call,
      result: r.request === undefined ? r.message : undefined,
      operations: r.operations,
      childEvents: this.#childEvents.get(call.id),
      usage: this.#childUsage.get(call.id),
      request: r.request,
      approval: r.approval,
      delegated: r.delegated,
    };
  }

  /** The turn's calls with their results, in call order; what their `task` calls delivered is theirs now. */
  settle(calls: readonly ModelToolCall[], results: readonly CallResult[]): PendingCall[] {
    const pending: PendingCall[] = results.map((r, i) => this.pendingOf(calls[i] as ModelToolCall, r));
    this.#childEvents.clear();
    this.#childUsage.clear();
    return pending;
  }
}
