import type {
  AgentId,
  ApprovalInvalidEvent,
  CancelReason,
  EventsDropped,
  ModelDelta,
  ModelErrorEvent,
  ModelStartEvent,
  ModelStopEvent,
  OperationDroppedEvent,
  Request,
  ToolExceptionEvent,
  ToolStartEvent,
  ToolStopEvent,
  ToolTimeoutEvent,
  Usage,
} from '@troupe/core';

/**
 * Bytes each channel of a spawn copies to the worker (the live scope-cost figure).
 *
 * @example
 * ```ts
 * supervisor.on('subagent.spawned', (e) => {
 *   const bytes: ChannelBytes = e.bytes
 *   if (bytes.scope > 2048) console.warn(`${e.agent}: scope is ${bytes.scope} B of ${bytes.total} B per spawn`)
 * })
 * ```
 */
export interface ChannelBytes {
  readonly scope: number;
  readonly toolContext: number;
  readonly metadata: number;
  readonly total: number;
}

interface At {
  /** When, in the Clock base. */
  readonly at: number;
}

/**
 * Which run an event belongs to. Ids are readable; none of them is authority.
 *
 * @example
 * ```ts
 * supervisor.on('agent.done', (e) => {
 *   const ref: RunRef = e
 *   console.log(`run ${ref.runId} of ${ref.path.join(' > ')}`)
 * })
 * ```
 */
export interface RunRef {
  readonly agentId: AgentId;
  /** The run (one message of a parent agent, one dispatch chain of a subagent). */
  readonly runId: string;
  /** Agent ids from the root down to this run. */
  readonly path: readonly AgentId[];
}

/**
 * What a run used: its own model calls, and its whole subtree's.
 *
 * @example
 * ```ts
 * supervisor.on('agent.done', (e) => {
 *   const { usage, totalUsage }: RunUsage = e
 *   console.log(`own ${usage.outputTokens} tokens, with subagents ${totalUsage.outputTokens}`)
 * })
 * ```
 */
export interface RunUsage {
  readonly usage: Usage;
  readonly totalUsage: Usage;
}

interface SubagentRef extends RunRef {
  readonly parentAgentId: AgentId | undefined;
}

/**
 * Where a worker run's last dispatch ran: its thread, the worker host of that thread when it is
 * not this process, and when it got it (`undefined`: it never did).
 *
 * @example
 * ```ts
 * supervisor.on('subagent.done', (e) => {
 *   const placed: RunPlacement = e
 *   if (placed.dispatchedAt !== undefined) console.log(`thread ${placed.threadId} on ${placed.host ?? 'this process'}, ${e.at - placed.dispatchedAt} ms from dispatch to done`)
 * })
 * ```
 */
export interface RunPlacement {
  readonly threadId: number | undefined;
  /** The worker host that ran it (a remote transport's `AttemptPlacement.host`); `undefined`: this process. */
  readonly host?: string | undefined;
  /** When the run was handed to its thread, in the Clock base (the queue wait ends here). */
  readonly dispatchedAt: number | undefined;
}

/**
 * The agent's model, as telemetry names it (`Model.name`, `Model.provider`).
 *
 * @example
 * ```ts
 * supervisor.on('agent.run.started', (e) => {
 *   const { model, provider }: RunModel = e
 *   console.log(`${e.agent} runs on ${provider ?? '?'}/${model ?? '?'}`)
 * })
 * ```
 */
export interface RunModel {
  readonly model: string | undefined;
  readonly provider: string | undefined;
}

/**
 * A message refused on a worker's host channel or parentPort.
 *
 * @example
 * ```ts
 * supervisor.on('host.refused', (e: HostRefusedEvent) => console.warn(`thread ${e.threadId}: ${e.reason}${e.recycled ? ' (recycled)' : ''}`))
 * ```
 */
export interface HostRefusedEvent extends At {
  readonly threadId: number;
  /** The worker host the call came from, when it was relayed from another machine. */
  readonly host?: string | undefined;
  readonly reason: string;
  /** The operation it named, when it named one. */
  readonly op: number | undefined;
  /** The run its capability named, when it named a real one. */
  readonly agentId: string | undefined;
  readonly runId: string | undefined;
  /** True when the thread is being recycled for it. */
  readonly recycled: boolean;
}

/**
 * A worker thread terminated on purpose (it is replaced).
 *
 * @example
 * ```ts
 * supervisor.on('worker.recycled', (e: WorkerRecycledEvent) => console.warn(`thread ${e.threadId} recycled: ${e.reason}`))
 * ```
 */
export interface WorkerRecycledEvent extends At {
  readonly threadId: number;
  /** The worker host of the thread, when it is not this process. */
  readonly host?: string | undefined;
  readonly agentId: string | undefined;
  readonly runId: string | undefined;
  readonly reason: 'tool-timeout' | 'cancel-ignored' | 'protocol';
  readonly detail?: string | undefined;
}

/**
 * The supervisor's typed event map (eventemitter3: name → listener arguments).
 *
 * Listeners run on the supervisor thread; one that throws is reported, not
 * swallowed. `supervisor.on(name, listener)` is typed by this map.
 *
 * @example
 * ```ts
 * const names: (keyof SupervisorEvents)[] = ['agent.failed', 'subagent.crashed']
 * supervisor.on('agent.failed', (e) => console.error(e.kind, e.error))
 * supervisor.on('subagent.crashed', (e) => console.error(`${e.agentId} exit ${e.exitCode}`))
 * ```
 */
export interface SupervisorEvents {
  'agent.started': [At & { readonly agentId: AgentId; readonly agent: string; readonly conversationId: string }];
  /** A parent agent's message starts running (or runs again: `resumed`, after an answer), on the caller's async context. */
  'agent.run.started': [At & RunRef & RunModel & { readonly agent: string; readonly resumed: boolean }];
  'agent.turn': [At & { readonly agentId: AgentId; readonly turn: number; readonly runId?: string }];
  /** A parent agent's message finished with an answer. */
  'agent.done': [At & RunRef & RunUsage & { readonly turns: number }];
  /** A failure (tool/model error) or a defect (a bug, a persistence error) of a parent agent's run. */
  'agent.failed': [At & RunRef & RunUsage & { readonly kind: 'failure' | 'defect'; readonly error: Error }];
  'agent.cancelled': [At & RunRef & RunUsage & { readonly reason: CancelReason }];
  /** A parent agent's message is suspended throughout: its tree waits on `requestId` (and maybe more). */
  'agent.suspended': [At & RunRef & RunUsage & { readonly requestId: string }];
  /** A parent agent's message reached its turn limit. */
  'agent.incomplete': [At & RunRef & RunUsage & { readonly turns: number }];
  /** The restart policy restarted the agent from its last saved state. */
  'agent.restarted': [At & { readonly agentId: AgentId; readonly restarts: number }];
  /** The agent was stopped: by `stop()`, or because it restarted too often. */
  'agent.stopped': [At & { readonly agentId: AgentId; readonly reason: string }];
  /**
   * A message met its agent waiting on a question (`requestId`): refused with
   * `ERR_AGENT_SUSPENDED` (`queued` false: sent without `{ whileSuspended: 'queue' }`,
   * or waiting behind a message that then suspended), or left to wait until the
   * question is answered or withdrawn (`queued` true). `waiting`: the messages
   * now waiting behind the question.
   */
  'agent.message.waiting': [
    At & { readonly agentId: AgentId; readonly requestId: string; readonly queued: boolean; readonly waiting: number },
  ];
  'tool.execute.start': [ToolStartEvent];
  'tool.execute.stop': [ToolStopEvent];
  'tool.execute.exception': [ToolExceptionEvent];
  'tool.execute.timeout': [ToolTimeoutEvent];
  'tool.approval.invalid': [ApprovalInvalidEvent];
  'model.start': [ModelStartEvent];
  'model.stop': [ModelStopEvent];
  'model.error': [ModelErrorEvent];
  /** Streamed deltas of a model call, in order, batched across the thread. */
  'model.delta': [At & RunRef & { readonly deltas: readonly ModelDelta[] }];
  'subagent.spawned': [
    At &
      SubagentRef & {
        readonly agent: string;
        readonly resumed: boolean;
        readonly bytes: ChannelBytes;
        /** The parent's `task` call that spawned it (`undefined`: a direct spawn). */
        readonly toolCallId: string | undefined;
      } & RunModel,
  ];
  'subagent.done': [At & SubagentRef & RunUsage & RunPlacement & { readonly turns: number }];
  'subagent.failed': [At & SubagentRef & RunUsage & RunPlacement & { readonly error: Error }];
  'subagent.crashed': [
    At & SubagentRef & RunUsage & RunPlacement & { readonly exitCode: number | null; readonly error: Error },
  ];
  'subagent.cancelled': [
    At & SubagentRef & RunUsage & RunPlacement & { readonly reason: CancelReason; readonly forced: boolean },
  ];
  'subagent.incomplete': [At & SubagentRef & RunUsage & RunPlacement & { readonly turns: number }];
  'subagent.suspended': [At & SubagentRef & RunUsage & RunPlacement & { readonly requestId: string }];
  /** A request reached the host: one per question, whatever depth it came from, as soon as it is asked. */
  'request.opened': [
    At & {
      readonly request: Request;
      readonly agentId: AgentId;
      readonly runId: string;
      readonly path: readonly AgentId[];
    },
  ];
  'request.answered': [
    At & { readonly requestId: string; readonly agentId: AgentId; readonly runId: string; readonly ok: boolean },
  ];
  /** A request can no longer be answered: its run was cancelled or ended. */
  'request.withdrawn': [At & { readonly requestId: string; readonly agentId: AgentId; readonly reason: string }];
  'context.events_dropped': [At & { readonly agentId: AgentId; readonly dropped: EventsDropped }];
  'context.operation_dropped': [OperationDroppedEvent];
  /** A worker sent something its host channel does not serve. */
  'host.refused': [HostRefusedEvent];
  'worker.recycled': [WorkerRecycledEvent];
  /**
   * `close()` or `destroy()` dropped open questions: the in-memory store (the
   * default) or `persistence: null` does not keep them past the supervisor.
   * `message` says so and how to keep them (a durable store). Without a
   * listener it is printed as a process warning (code `TROUPE_REQUESTS_DROPPED`).
   */
  'requests.dropped': [At & { readonly requestIds: readonly string[]; readonly message: string }];
  /** Saving a run's row or request failed (the run itself went on); the store's error. */
  'persistence.failed': [At & { readonly agentId: AgentId; readonly runId: string; readonly error: Error }];
}
