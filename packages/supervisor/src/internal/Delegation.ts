import {
  type Agent,
  type AgentId,
  type Answer,
  ApprovalDecision,
  type ApprovalHandler,
  CancelledError,
  type Clock,
  createId,
  decodeError,
  encodeError,
  type HostApprovalRequest,
  type HostTaskRequest,
  type HostTaskResult,
  type HostTelemetry,
  isTroupeError,
  type LoopState,
  type Metadata,
  type Request,
  type Scope,
  serializedSize,
  subagentId,
  type TaskResult,
  type TaskSpawner,
  type ToolCallId,
  TroupeError,
} from '@troupe/core';
import { loadAgent, loadedAgent } from '@troupe/subagent';
import type { EventEmitter } from 'eventemitter3';
import type { SubagentOutcome } from '../SubagentOutcome.js';
import type { RunHost, SpawnSpec, SubagentPool } from '../SubagentPool.js';
import type { SupervisorEvents } from '../SupervisorEvents.js';

/** What delegation needs to know about the agent that calls `task`. */
export interface RunRecord {
  readonly agentId: AgentId;
  readonly agent: Agent;
  readonly scope: Scope;
  readonly toolContext: Readonly<Record<string, unknown>>;
  /** Agent ids from the root down to this agent's parent. */
  readonly ancestry: readonly AgentId[];
  /** The number of the next child (`<agentId>-sub-<n>`); never reused, even across suspensions. */
  nextChild(): number;
}

interface SuspendedChild {
  readonly agent: Agent;
  readonly record: RunRecord;
  readonly state: LoopState;
  readonly request: Request;
}

/** The approval question the supervisor issued, by request id: only these can approve a call on resume. */
interface IssuedApproval {
  readonly agentId: AgentId;
  readonly toolCallId: string;
}

/** Options of {@link Delegation}. */
export interface DelegationOptions {
  readonly pool: SubagentPool;
  readonly clock: Clock;
  readonly events: EventEmitter<SupervisorEvents>;
  readonly approval: ApprovalHandler | undefined;
  /** Default relative deadline of a subagent run. */
  readonly subagentTimeoutMs: number | undefined;
}

const TELEMETRY_EVENTS = new Set<keyof SupervisorEvents>([
  'tool.execute.start',
  'tool.execute.stop',
  'tool.execute.exception',
  'tool.execute.timeout',
  'tool.approval.invalid',
  'agent.turn',
  'context.events_dropped',
]);

const recordKey = (agentId: AgentId, toolCallId: string): string => `${agentId}/${toolCallId}`;

/**
 * Delegation on the supervisor thread: runs the `task` calls of every agent
 * (parents here, subagents over their host channel — the supervisor owns the
 * pool and the cancellation table), keeps suspended children so a resumed
 * parent re-attaches to the same child, and routes approval through the
 * host's handler, which is the only thing that can approve a call.
 */
export class Delegation {
  readonly #o: DelegationOptions;
  readonly #suspended = new Map<string, SuspendedChild>();
  readonly #origins = new Map<string, readonly AgentId[]>();
  readonly #approvals = new Map<string, IssuedApproval>();
  // Runs in flight per parent: a run ends only after its children did (structured concurrency).
  readonly #children = new Map<AgentId, Set<Promise<unknown>>>();

  constructor(options: DelegationOptions) {
    this.#o = options;
  }

  /** A spawner for one run's `task` tool. */
  spawnerFor(record: RunRecord): TaskSpawner {
    return {
      runTask: (request) =>
        this.runTask(record, {
          subagent: request.subagent.name,
          instructions: request.instructions,
          toolCallId: request.toolCallId,
          answer: request.answer,
          metadata: request.metadata,
        }),
    };
  }

  /** The approval handler a run's executor asks (on this thread, or from a worker over the host channel). */
  approvalFor(record: RunRecord): ApprovalHandler | undefined {
    const handler = this.#o.approval;
    if (handler === undefined) return undefined;
    return async (request, options) => {
      let raw: unknown;
      try {
        raw = await handler({ ...request, agentId: record.agentId, scope: record.scope }, options);
      } catch (error) {
        return {
          decision: 'reject',
          reason: `the approval handler threw: ${(error as Error)?.message ?? String(error)}`,
        };
      }
      const decision = ApprovalDecision.safeParse(raw);
      if (decision.success && decision.data.decision === 'ask') {
        const requestId = createId('req');
        this.#approvals.set(requestId, { agentId: record.agentId, toolCallId: request.toolCallId });
        return { ...decision.data, requestId };
      }
      // Anything else goes back as it came: the executor denies what is not a decision, and says so.
      return raw as ApprovalDecision;
    };
  }

  /** The host channel of a subagent run. */
  hostFor(record: RunRecord, telemetry: boolean): RunHost {
    // A class instance, not closures: one host is made per subagent run.
    return telemetry ? new TelemetryHost(this, record) : new ChildHost(this, record);
  }

  /** Re-emit a worker's telemetry event on the supervisor's emitter (known events only). */
  emitTelemetry(event: HostTelemetry): void {
    const name = event.event as keyof SupervisorEvents;
    if (!TELEMETRY_EVENTS.has(name)) return;
    const payload = { ...event.payload };
    if (name === 'tool.execute.exception' && typeof payload.reason === 'object' && payload.reason !== null) {
      payload.reason = decodeError(payload.reason as never);
    }
    (this.#o.events.emit as (n: string, p: unknown) => boolean)(name, payload);
  }

  /** The calls a resumed run may execute as approved: only what this supervisor issued for it. */
  approvedCalls(agentId: AgentId, answer: Answer): string[] {
    const issued = this.#approvals.get(answer.id);
    if (issued === undefined || issued.agentId !== agentId) return [];
    this.#approvals.delete(answer.id);
    return answer.ok ? [issued.toolCallId] : [];
  }

  /** Where a request came from: agent ids from the root to the agent whose tool asked. */
  takeOrigin(requestId: string, fallback: readonly AgentId[]): readonly AgentId[] {
    const path = this.#origins.get(requestId);
    this.#origins.delete(requestId);
    return path ?? fallback;
  }

  /** Note where a request was first raised (the deepest agent that suspended with it). */
  noteOrigin(requestId: string, path: readonly AgentId[]): void {
    if (!this.#origins.has(requestId)) this.#origins.set(requestId, path);
  }

  /** Forget every suspended descendant of `agentId` (its request was withdrawn). */
  forget(agentId: AgentId, requestId?: string): void {
    for (const [key, child] of this.#suspended) {
      // Keys are `<agentId>/<call>`; descendants' ids start with `<agentId>-sub-`.
      if (key.startsWith(`${agentId}/`) || key.startsWith(`${agentId}-sub-`)) {
        this.#suspended.delete(key);
        this.#approvals.delete(child.request.id);
      }
    }
    if (requestId !== undefined) {
      this.#origins.delete(requestId);
      this.#approvals.delete(requestId);
    }
  }

  /** Counts, for leak checks. */
  get sizes(): { suspended: number; origins: number; approvals: number; parents: number } {
    return {
      suspended: this.#suspended.size,
      origins: this.#origins.size,
      approvals: this.#approvals.size,
      parents: this.#children.size,
    };
  }

  async runTask(
    parent: RunRecord,
    request: {
      readonly subagent: string;
      readonly instructions: string;
      readonly toolCallId: string;
      readonly answer: Answer | undefined;
      readonly metadata: Metadata;
    },
  ): Promise<TaskResult> {
    const { pool, events, clock } = this.#o;
    const key = recordKey(parent.agentId, request.toolCallId);
    let child: { agent: Agent; record: RunRecord };
    const ancestry = [...parent.ancestry, parent.agentId];
    const telemetry = hasTelemetryListeners(events);
    const timeoutMs = this.#o.subagentTimeoutMs;
    // Built as literals, not spreads: this runs once per delegated task.
    let spec: SpawnSpec;
    if (request.answer !== undefined) {
      const saved = this.#suspended.get(key);
      if (saved === undefined) {
        return {
          status: 'error',
          error: new TroupeError(
            `no suspended subagent waits on call ${request.toolCallId} of ${parent.agentId} (was the supervisor restarted without its state?)`,
            { code: 'ERR_UNKNOWN_REQUEST' },
          ),
          events: [],
        };
      }
      this.#suspended.delete(key);
      child = { agent: saved.agent, record: saved.record };
      spec = {
        agent: saved.agent,
        agentId: saved.record.agentId,
        parentAgentId: parent.agentId,
        ancestry,
        scope: parent.scope,
        toolContext: parent.toolContext,
        metadata: saved.state.metadata,
        resume: {
          state: saved.state,
          answer: request.answer,
          approvedCalls: this.approvedCalls(saved.record.agentId, request.answer),
        },
        host: this.hostFor(saved.record, telemetry),
        telemetry,
        timeoutMs,
      };
    } else {
      const agent = subagentNamed(parent.agent, request.subagent);
      if (agent === undefined) {
        return {
          status: 'error',
          error: new TroupeError(
            `"${request.subagent}" is not a subagent of ${parent.agent.name}; declare it in subagents`,
            {
              code: 'ERR_UNKNOWN_AGENT',
            },
          ),
          events: [],
        };
      }
      const agentId = subagentId(parent.agentId, parent.nextChild());
      const definition =
        agent.module === undefined ? agent : (loadedAgent(agent.module, agent.name) ?? (await resolveAgent(agent)));
      const record = childRecord(agentId, definition, parent, ancestry);
      child = { agent, record };
      spec = {
        agent,
        agentId,
        input: request.instructions,
        parentAgentId: parent.agentId,
        ancestry,
        scope: parent.scope,
        toolContext: parent.toolContext,
        metadata: request.metadata,
        host: this.hostFor(record, telemetry),
        telemetry,
        timeoutMs,
      };
    }
    emitSpawned(events, clock, spec, child.record.agentId, parent.agentId, child.agent.name);
    let outcome: SubagentOutcome;
    const running = pool.run(spec);
    let siblings = this.#children.get(parent.agentId);
    if (siblings === undefined) {
      siblings = new Set();
      this.#children.set(parent.agentId, siblings);
    }
    siblings.add(running);
    try {
      outcome = await running;
    } catch (error) {
      return { status: 'error', error: error instanceof Error ? error : new Error(String(error)), events: [] };
    } finally {
      siblings.delete(running);
      if (siblings.size === 0) this.#children.delete(parent.agentId);
      // The child's own children (spawned from its worker) end before it is settled.
      const grandchildren = this.drain(child.record.agentId);
      if (grandchildren !== undefined) await grandchildren;
    }
    return this.#settle(parent, key, child, ancestry, outcome);
  }

  /**
   * Resolve once every subagent run spawned by `agentId` has ended. A
   * cancelled run is not over until its children are: their slots were
   * cancelled with it, and the watchdog kills any that ignore it.
   */
  drain(agentId: AgentId): Promise<void> | undefined {
    // No promise at all when there is nothing to wait for: the common case, once per task.
    const running = this.#children.get(agentId);
    if (running === undefined || running.size === 0) return undefined;
    return Promise.allSettled([...running]).then(() => this.drain(agentId));
  }

  #settle(
    parent: RunRecord,
    key: string,
    child: { agent: Agent; record: RunRecord },
    ancestry: readonly AgentId[],
    outcome: SubagentOutcome,
  ): TaskResult {
    const { events, clock, pool } = this.#o;
    const at = clock.now();
    const agentId = child.record.agentId;
    const parentAgentId = parent.agentId;
    // A parent cancelled while its child finished: no `done` follows a cancel.
    if (outcome.status !== 'cancelled' && outcome.status !== 'crashed' && pool.table.isCancelled(parentAgentId)) {
      const reason = pool.table.reason(parentAgentId) ?? 'user';
      events.emit('subagent.cancelled', { agentId, parentAgentId, reason: 'parent', forced: false, at });
      return { status: 'error', error: new CancelledError(reason === 'deadline' ? 'deadline' : 'parent'), events: [] };
    }
    emitOutcome(events, at, outcome, parentAgentId);
    switch (outcome.status) {
      case 'done':
        return {
          status: 'done',
          result: outcome.result,
          updates: parent.agent.mergeMetadataFrom.has(child.agent.name) ? outcome.updates : undefined,
          events: outcome.events,
        };
      case 'suspended':
        this.#suspended.set(key, {
          agent: child.agent,
          record: child.record,
          state: outcome.state,
          request: outcome.request,
        });
        this.noteOrigin(outcome.request.id, [...ancestry, agentId]);
        return { status: 'suspended', request: outcome.request };
      case 'failed':
        return { status: 'error', error: outcome.error, events: outcome.events };
      case 'crashed':
        return { status: 'error', error: outcome.error, events: [] };
      case 'cancelled':
        return { status: 'error', error: new CancelledError(outcome.reason), events: [] };
      case 'incomplete':
        return {
          status: 'error',
          error: new TroupeError(`subagent ${agentId} reached its turn limit (${outcome.turns}) without an answer`, {
            code: 'ERR_TOOL_FAILED',
          }),
          events: outcome.events,
        };
    }
  }
}

/** Emit `subagent.spawned` with the bytes each channel copies (only when someone listens). */
export function emitSpawned(
  events: EventEmitter<SupervisorEvents>,
  clock: Clock,
  spec: SpawnSpec,
  agentId: AgentId,
  parentAgentId: AgentId | undefined,
  agent: string,
): void {
  if (events.listenerCount('subagent.spawned') === 0) return;
  const scope = serializedSize(spec.scope);
  const toolContext = serializedSize(spec.toolContext ?? {});
  const metadata = serializedSize(spec.metadata ?? {});
  events.emit('subagent.spawned', {
    agentId,
    parentAgentId,
    agent,
    resumed: spec.resume !== undefined,
    bytes: { scope, toolContext, metadata, total: scope + toolContext + metadata },
    at: clock.now(),
  });
}

/** Emit the event of a subagent outcome (`subagent.done`, `.failed`, `.crashed`, ...). */
export function emitOutcome(
  events: EventEmitter<SupervisorEvents>,
  at: number,
  outcome: SubagentOutcome,
  parentAgentId: AgentId | undefined,
): void {
  const agentId = outcome.agentId;
  switch (outcome.status) {
    case 'done':
      events.emit('subagent.done', { agentId, parentAgentId, turns: outcome.turns, at });
      break;
    case 'suspended':
      events.emit('subagent.suspended', { agentId, parentAgentId, requestId: outcome.request.id, at });
      break;
    case 'failed':
      events.emit('subagent.failed', { agentId, parentAgentId, error: outcome.error, at });
      break;
    case 'crashed':
      events.emit('subagent.crashed', { agentId, parentAgentId, exitCode: outcome.exitCode, error: outcome.error, at });
      break;
    case 'cancelled':
      events.emit('subagent.cancelled', { agentId, parentAgentId, reason: outcome.reason, forced: outcome.forced, at });
      break;
    case 'incomplete':
      events.emit('subagent.incomplete', { agentId, parentAgentId, turns: outcome.turns, at });
      break;
  }
}

// An agent's subagents by name, indexed once per agent.
const subagentIndex = new WeakMap<Agent, ReadonlyMap<string, Agent>>();

function subagentNamed(agent: Agent, name: string): Agent | undefined {
  let index = subagentIndex.get(agent);
  if (index === undefined) {
    index = new Map(agent.subagents.map((a) => [a.name, a]));
    subagentIndex.set(agent, index);
  }
  return index.get(name);
}

/** A subagent run's record: what delegation needs of it when it calls `task` in turn. */
class ChildRecord implements RunRecord {
  readonly agentId: AgentId;
  readonly agent: Agent;
  readonly scope: Scope;
  readonly toolContext: Readonly<Record<string, unknown>>;
  readonly ancestry: readonly AgentId[];
  #children = 0;
  constructor(agentId: AgentId, agent: Agent, parent: RunRecord, ancestry: readonly AgentId[]) {
    this.agentId = agentId;
    this.agent = agent;
    this.scope = parent.scope;
    this.toolContext = parent.toolContext;
    this.ancestry = ancestry;
  }
  nextChild(): number {
    return ++this.#children;
  }
}

function childRecord(agentId: AgentId, agent: Agent, parent: RunRecord, ancestry: readonly AgentId[]): RunRecord {
  return new ChildRecord(agentId, agent, parent, ancestry);
}

/** What a subagent run may ask of the supervisor over its worker's host channel. */
class ChildHost implements RunHost {
  readonly #delegation: Delegation;
  readonly #record: RunRecord;
  constructor(delegation: Delegation, record: RunRecord) {
    this.#delegation = delegation;
    this.#record = record;
  }

  // Always offered: with no handler configured the answer is a denial, decided here.
  approve(request: HostApprovalRequest, signal: AbortSignal): Promise<unknown> {
    const record = this.#record;
    const approve = this.#delegation.approvalFor(record);
    if (approve === undefined) {
      return Promise.resolve({ decision: 'reject', reason: 'no approval handler is configured' });
    }
    return Promise.resolve(
      approve(
        {
          toolName: request.toolName,
          toolCallId: request.toolCallId as ToolCallId,
          arguments: request.arguments,
          agentId: record.agentId,
          parentAgentId: record.ancestry[record.ancestry.length - 1],
        },
        { signal },
      ),
    );
  }

  async runTask(request: HostTaskRequest): Promise<HostTaskResult> {
    const result = await this.#delegation.runTask(this.#record, {
      subagent: request.subagent,
      instructions: request.instructions,
      toolCallId: request.toolCallId,
      answer: request.answer,
      metadata: request.metadata,
    });
    switch (result.status) {
      case 'done':
        return result.updates === undefined
          ? { status: 'done', result: result.result, events: [...result.events] }
          : { status: 'done', result: result.result, updates: [...result.updates], events: [...result.events] };
      case 'suspended':
        return { status: 'suspended', request: result.request };
      case 'error':
        return { status: 'error', error: encodeError(result.error), events: [...result.events] };
    }
  }
}

/** A host that also forwards the worker's telemetry (only made when someone listens). */
class TelemetryHost extends ChildHost {
  readonly #delegation: Delegation;
  constructor(delegation: Delegation, record: RunRecord) {
    super(delegation, record);
    this.#delegation = delegation;
  }
  telemetry(event: HostTelemetry): void {
    this.#delegation.emitTelemetry(event);
  }
}

// The child's definition as its own module exports it (its declared subagents matter for nested tasks).
async function resolveAgent(agent: Agent): Promise<Agent> {
  if (agent.module === undefined) return agent;
  try {
    return await loadAgent(agent.module, agent.name);
  } catch (error) {
    if (isTroupeError(error)) return agent;
    throw error;
  }
}

/** True when someone listens to an event only a worker's telemetry can produce. */
export function hasTelemetryListeners(events: EventEmitter<SupervisorEvents>): boolean {
  for (const name of TELEMETRY_EVENTS) if (events.listenerCount(name) > 0) return true;
  return false;
}
