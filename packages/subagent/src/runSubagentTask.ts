import { workerData } from 'node:worker_threads';
import {
  type AgentId,
  type ApprovalHandler,
  CancelledError,
  CancelSlots,
  decodeError,
  deepFreeze,
  encodeError,
  HostTaskResult,
  initialLoopState,
  type LoopEventSink,
  type LoopEvents,
  type LoopOutcome,
  type Operation,
  PROTOCOL_VERSION,
  type RunContext,
  runAgentLoop,
  type Scope,
  type SubagentResult,
  SubagentTask,
  slotRunCancellation,
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

const ZERO_USAGE = Object.freeze({ inputTokens: 0, outputTokens: 0 });

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
      host.notify((api) => api.telemetry({ event, payload }));
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

// Object literals, not spreads: this runs once per subagent run.
function toResult(task: SubagentTask, outcome: LoopOutcome): SubagentResult {
  const { state } = outcome;
  const v = PROTOCOL_VERSION;
  const { runId, agentId } = task;
  const { usage, turns } = state;
  const events = state.events as SubagentResult['events'];
  switch (outcome.status) {
    case 'done':
      return {
        v,
        runId,
        agentId,
        usage,
        turns,
        events,
        status: 'done',
        text: outcome.text,
        updates: state.updates as Operation[],
      };
    case 'failed':
      return { v, runId, agentId, usage, turns, events, status: 'failed', error: encodeError(outcome.error) };
    case 'incomplete':
      return { v, runId, agentId, usage, turns, events, status: 'incomplete' };
    case 'cancelled':
      return { v, runId, agentId, usage, turns, events, status: 'cancelled', reason: outcome.reason };
    case 'suspended':
      return { v, runId, agentId, usage, turns, events, status: 'suspended', request: outcome.request, state };
  }
}

function failedResult(runId: string, agentId: string, error: unknown): SubagentResult {
  return {
    v: PROTOCOL_VERSION,
    runId,
    agentId,
    usage: ZERO_USAGE,
    turns: 0,
    events: [],
    status: 'failed',
    error: encodeError(error),
  };
}

/**
 * Run one subagent task in this worker: parse the task at the port, load the
 * agent module (cached), rebuild the three channels, bridge the cancellation
 * slot, run the loop and return the outcome. Never throws: every failure is
 * a `failed` result (a worker that dies is reported by the supervisor).
 */
export async function runSubagentTask(raw: unknown): Promise<SubagentResult> {
  const parsed = SubagentTask.safeParse(raw);
  if (!parsed.success) {
    const r = raw as { runId?: unknown; agentId?: unknown } | null;
    return failedResult(
      typeof r?.runId === 'string' ? r.runId : '',
      typeof r?.agentId === 'string' ? r.agentId : '',
      new TroupeError(`malformed subagent task: ${parsed.error.issues[0]?.message ?? 'invalid'}`, {
        code: 'ERR_PROTOCOL',
      }),
    );
  }
  const task = parsed.data;
  let cancellation: ReturnType<typeof slotRunCancellation>;
  try {
    cancellation = slotRunCancellation(cancelSlots(), task.slot, {
      deadline: task.deadline ?? undefined,
      clock: systemClock,
    });
  } catch (error) {
    return failedResult(task.runId, task.agentId, error);
  }
  const host = new HostLink(task.runId, cancellation);
  try {
    const agent =
      loadedAgent(task.agent.module, task.agent.name) ?? (await loadAgent(task.agent.module, task.agent.name));
    const scope = deepFreeze(task.scope) as Scope;
    const run: RunContext = {
      scope,
      toolContext: deepFreeze(task.toolContext),
      agentId: task.agentId as AgentId,
      parentAgentId: task.parentAgentId as AgentId | undefined,
    };
    const resume = task.resume;
    const state =
      resume === undefined
        ? initialLoopState(run.agentId, agent.instructions, deepFreeze(task.metadata))
        : { ...resume.state, metadata: deepFreeze(resume.state.metadata) };
    const approval: ApprovalHandler | undefined = task.host.approval
      ? (request) =>
          host.call((api) =>
            api.approve({ toolName: request.toolName, toolCallId: request.toolCallId, arguments: request.arguments }),
          ) as ReturnType<ApprovalHandler>
      : undefined;
    const spawner: TaskSpawner | undefined = task.host.spawn
      ? {
          runTask: (request) =>
            host
              .call<unknown>((api) =>
                (api.runTask as (r: unknown) => Promise<unknown>)({
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
      events: task.host.telemetry ? telemetrySink(host) : undefined,
    });
    return toResult(task, outcome);
  } catch (error) {
    return failedResult(task.runId, task.agentId, error);
  } finally {
    host.close();
    cancellation.close();
  }
}
