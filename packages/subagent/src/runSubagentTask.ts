import { deserialize } from 'node:v8';
import { threadId, workerData } from 'node:worker_threads';
import {
  type AgentId,
  type ApprovalHandler,
  CancelledError,
  CancelSlots,
  decodeError,
  decodeSubagentTask,
  encodeError,
  encodeSubagentResult,
  freezeReceived,
  HostFeature,
  HostTaskResult,
  initialLoopState,
  type LoopEventSink,
  type LoopEvents,
  type LoopOutcome,
  type RunContext,
  runAgentLoop,
  type Scope,
  type SubagentResult,
  type SubagentTask,
  slotRunCancellation,
  TaskFlag,
  type TaskResult,
  type TaskSpawner,
  TroupeError,
} from '@troupe/core';
import { HostLink } from './internal/HostLink.js';
import { loadAgent, loadedAgent } from './loadAgent.js';
import { systemClock } from './systemClock.js';

/** What the supervisor passes every worker once, as piscina `workerData`. */
export interface SubagentWorkerData {
  /** The cancellation table's buffer, shared by every thread. */
  readonly cancelBuffer: SharedArrayBuffer;
}

// A versioned scope never changes (see SubagentTask.scopeVersion): each
// version is decoded (heavy scopes arrive as shared bytes) or frozen once per
// worker and reused. Heavy ones: the few most recently used. Lean ones: the
// most recently received; a hit is one lookup, where freezing the fresh copy
// costs ~1 µs of a worker that has just woken up (cold caches).
const HEAVY_SCOPES = 4;
const heavyScopes = new Map<number, unknown>();
const LEAN_SCOPES = 16;
const leanScopes = new Map<number, unknown>();

function receivedScope(task: SubagentTask): unknown {
  const version = task.scopeVersion ?? 0;
  if ((task.host & TaskFlag.serializedScope) === 0) {
    if (version === 0) return freezeReceived(task.scope);
    const cached = leanScopes.get(version);
    if (cached !== undefined) return cached;
    const scope = freezeReceived(task.scope);
    leanScopes.set(version, scope);
    if (leanScopes.size > LEAN_SCOPES) leanScopes.delete(leanScopes.keys().next().value as number);
    return scope;
  }
  const bytes = task.scope as Uint8Array;
  if (version === 0) return freezeReceived(deserialize(bytes));
  const cached = heavyScopes.get(version);
  if (cached !== undefined) {
    heavyScopes.delete(version);
    heavyScopes.set(version, cached);
    return cached;
  }
  const scope = freezeReceived(deserialize(bytes));
  heavyScopes.set(version, scope);
  if (heavyScopes.size > HEAVY_SCOPES) heavyScopes.delete(heavyScopes.keys().next().value as number);
  return scope;
}

let attached: CancelSlots | undefined;

// One view of the shared table per worker: attaching builds typed-array views.
function cancelSlots(): CancelSlots {
  if (attached !== undefined) return attached;
  const data = workerData as Partial<SubagentWorkerData> | undefined;
  if (!(data?.cancelBuffer instanceof SharedArrayBuffer)) {
    throw new TroupeError('this worker was started without a cancellation table (workerData.cancelBuffer)', {
      code: 'ERR_PROTOCOL',
    });
  }
  attached = CancelSlots.attach(data.cancelBuffer);
  return attached;
}

/** Telemetry forwarded over the host channel; only built when the supervisor has listeners. */
function telemetrySink(host: HostLink): LoopEventSink {
  return {
    listenerCount: () => 1,
    emit<K extends keyof LoopEvents>(event: K, ...args: LoopEvents[K]): boolean {
      const payload = { ...(args[0] as unknown as Record<string, unknown>) };
      if (payload.reason instanceof Error || (payload.reason !== undefined && event === 'tool.execute.exception')) {
        payload.reason = encodeError(payload.reason);
      }
      host.notify((api, agentId) => api.telemetry(agentId, { event, payload }));
      return true;
    },
  };
}

function decodeTaskResult(raw: unknown): TaskResult {
  const parsed = HostTaskResult.safeParse(raw);
  if (!parsed.success) {
    return {
      status: 'error',
      error: new TroupeError('the supervisor answered a task with a malformed result', { code: 'ERR_PROTOCOL' }),
      events: [],
    };
  }
  const r = parsed.data;
  switch (r.status) {
    case 'done':
      return { status: 'done', result: r.result, updates: r.updates, events: r.events };
    case 'suspended':
      return { status: 'suspended', request: r.request };
    case 'error':
      return { status: 'error', error: decodeError(r.error), events: r.events };
  }
}

const EMPTY: Readonly<Record<string, unknown>> = Object.freeze({});

// Defaults are left out (see SubagentTask): every property costs on both threads.
function toResult(outcome: LoopOutcome): SubagentResult {
  const { state } = outcome;
  const turns = state.turns;
  const usage = state.usage.inputTokens !== 0 || state.usage.outputTokens !== 0 ? state.usage : undefined;
  const events = state.events.length > 0 ? state.events : undefined;
  switch (outcome.status) {
    case 'done':
      return {
        turns,
        usage,
        events,
        status: 'done',
        text: outcome.text,
        updates: state.updates.length === 0 ? undefined : state.updates,
      };
    case 'failed':
      return { turns, usage, events, status: 'failed', error: encodeError(outcome.error) };
    case 'incomplete':
      return { turns, usage, events, status: 'incomplete' };
    case 'cancelled':
      return { turns, usage, events, status: 'cancelled', reason: outcome.reason };
    case 'suspended':
      return { turns, usage, events, status: 'suspended', request: outcome.request, state };
  }
}

function failedResult(error: unknown): SubagentResult {
  return { turns: 0, status: 'failed', error: encodeError(error) };
}

/**
 * Run one subagent task in this worker: parse the task at the port, load the
 * agent module (cached), rebuild the three channels, bridge the cancellation
 * slot, run the loop and return the outcome. Never throws: every failure is
 * a `failed` result (a worker that dies is reported by the supervisor).
 *
 * Gotcha: `raw` must be this thread's own copy of the task, as a port
 * delivers it: its channels are frozen in place on the assumption that
 * nothing in them is frozen yet (see `freezeReceived`). Calling it in the
 * thread that built the task would freeze the caller's objects.
 */
export async function runSubagentTask(raw: unknown): Promise<unknown[]> {
  return encodeSubagentResult(await runTask(raw));
}

async function runTask(raw: unknown): Promise<SubagentResult> {
  const decoded = decodeSubagentTask(raw);
  if (decoded.error !== undefined) {
    return failedResult(new TroupeError(`malformed subagent task: ${decoded.error}`, { code: 'ERR_PROTOCOL' }));
  }
  const task = decoded.task;
  let cancellation: ReturnType<typeof slotRunCancellation>;
  try {
    const slots = cancelSlots();
    const handle = { index: task.slot, generation: task.generation };
    // The task carries the slot's deadline when there is one: no need to read it back.
    cancellation = slotRunCancellation(slots, handle, { deadline: task.deadline ?? null, clock: systemClock });
    // Tell the supervisor which thread to kill if this run has to be stopped by force.
    slots.setOwner(handle, threadId);
  } catch (error) {
    return failedResult(error);
  }
  const host = new HostLink(task.agentId, cancellation);
  try {
    const agent = loadedAgent(task.module, task.agent) ?? (await loadAgent(task.module, task.agent));
    // The channels are this thread's own fresh copies (or a kept one of the
    // same scope version): frozen, never measured here.
    const scope = receivedScope(task) as Scope;
    const run: RunContext = {
      scope,
      toolContext: task.toolContext === undefined ? EMPTY : freezeReceived(task.toolContext),
      agentId: task.agentId as AgentId,
      parentAgentId: task.parentAgentId as AgentId | undefined,
    };
    const resume = task.resume;
    const state =
      resume === undefined
        ? initialLoopState(
            run.agentId,
            agent.instructions,
            task.metadata === undefined ? EMPTY : freezeReceived(task.metadata),
          )
        : { ...resume.state, metadata: freezeReceived(resume.state.metadata) };
    const approval: ApprovalHandler | undefined =
      (task.host & HostFeature.approval) !== 0
        ? (request) =>
            host.call((api, agentId) =>
              api.approve(agentId, {
                toolName: request.toolName,
                toolCallId: request.toolCallId,
                arguments: request.arguments,
              }),
            ) as ReturnType<ApprovalHandler>
        : undefined;
    const spawner: TaskSpawner | undefined =
      (task.host & HostFeature.spawn) !== 0
        ? {
            runTask: (request) =>
              host
                .call<unknown>((api, agentId) =>
                  (api.runTask as (id: string, r: unknown) => Promise<unknown>)(agentId, {
                    subagent: request.subagent.name,
                    instructions: request.instructions,
                    toolCallId: request.toolCallId,
                    metadata: request.metadata as Record<string, unknown>,
                    ...(request.answer === undefined ? {} : { answer: request.answer }),
                  }),
                )
                .then(
                  decodeTaskResult,
                  (error: unknown): TaskResult => ({
                    status: 'error',
                    error: error instanceof Error ? error : new CancelledError('user'),
                    events: [],
                  }),
                ),
          }
        : undefined;
    const outcome = await runAgentLoop({
      agent,
      run,
      state,
      input: resume === undefined ? task.input : undefined,
      answer: resume?.answer,
      approvedCalls: resume === undefined ? undefined : new Set(resume.approvedCalls),
      clock: systemClock,
      cancellation,
      approval,
      spawner,
      events: (task.host & HostFeature.telemetry) !== 0 ? telemetrySink(host) : undefined,
    });
    return toResult(outcome);
  } catch (error) {
    return failedResult(error);
  } finally {
    host.close();
    cancellation.close();
  }
}
