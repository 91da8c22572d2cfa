import { deserialize, serialize } from 'node:v8';
import {
  type AgentId,
  type ApprovalHandler,
  asError,
  CancelledError,
  type Scope,
  type TaskResult,
  TroupeError,
} from '@troupe/core';
import {
  CancelSlots,
  decodeError,
  decodeSubagentTask,
  encodeError,
  encodeSubagentFailure,
  encodeSubagentResult,
  freezeReceived,
  HostFeature,
  HostOp,
  HostTaskResult,
  initialLoopState,
  KeptScopes,
  type LoopEventSink,
  type LoopEvents,
  type LoopOutcome,
  ResultSlot,
  type RunContext,
  runAgentLoop,
  type SubagentTask,
  slotRunCancellation,
  TaskFlag,
  TaskSlot,
  type TaskSpawner,
  telemetryBit,
} from '@troupe/core/internal';
import { checkpointsOver } from './internal/checkpointsOver.js';
import { HostLink } from './internal/HostLink.js';
import { loadAgent, loadedAgent } from './loadAgent.js';
import { systemClock } from './systemClock.js';

// A versioned scope never changes (see SubagentTask.scopeVersion): each
// version is decoded (heavy scopes arrive as shared bytes) or frozen once per
// worker and reused. Heavy ones: the few most recently used. Lean ones: the
// first KEPT_SCOPES received, by the rule the supervisor mirrors (KeptScopes):
// a task of a version this thread holds comes without its scope (`null`),
// which saves copying it on both threads, and a hit is one lookup, where
// freezing the fresh copy costs ~1 µs of a worker that has just woken up.
const HEAVY_SCOPES = 4;
const heavyScopes = new Map<number, unknown>();
const leanScopes = new KeptScopes<unknown>();

function receivedScope(task: SubagentTask): unknown {
  const version = task.scopeVersion ?? 0;
  if ((task.host & TaskFlag.serializedScope) === 0) {
    if (version === 0) return freezeReceived(task.scope);
    const cached = leanScopes.get(version);
    if (cached !== undefined) return cached;
    if (task.scope === null) {
      throw new TroupeError(
        `the task names scope version ${version} as kept by this worker, which holds no such version (the supervisor's record of this thread is wrong: a defect)`,
        { code: 'ERR_PROTOCOL' },
      );
    }
    const scope = freezeReceived(task.scope);
    leanScopes.add(version, scope);
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

// This thread's cancellation buffer: its own (no other thread's runs live in
// it), sent by the supervisor with the first task this thread receives.
let attached: CancelSlots | undefined;

function cancelSlots(task: SubagentTask): CancelSlots {
  const buffer = task.buffer;
  if (buffer !== undefined && buffer !== attached?.buffer) attached = CancelSlots.attach(buffer);
  if (attached === undefined) {
    throw new TroupeError('this worker received a task before its cancellation buffer', { code: 'ERR_PROTOCOL' });
  }
  return attached;
}

/**
 * Telemetry forwarded over the host channel; only built when the supervisor
 * has listeners, and only for the events it says it listens to (`bits`: the
 * task's host bits, see TELEMETRY_SHIFT).
 */
function telemetrySink(host: HostLink, bits: number): LoopEventSink {
  return {
    listenerCount: (event) => ((bits & telemetryBit(event)) !== 0 ? 1 : 0),
    emit<K extends keyof LoopEvents>(event: K, ...args: LoopEvents[K]): boolean {
      const payload = { ...(args[0] as unknown as Record<string, unknown>) };
      if (event === 'tool.execute.exception') payload.reason = encodeError(payload.reason);
      else if (event === 'model.error') payload.error = encodeError(payload.error);
      host.event(['t', event, payload]);
      return true;
    },
  };
}

// The supervisor's answer to a task call, checked: its error (if it has one) back from a shape,
// the one field that crossed in another form (see RunAttempt's encodeTaskResult).
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
  // The schema's type differs from TaskResult only in `updates` being optional (absent reads undefined).
  return (r.status === 'error' ? { ...r, error: decodeError(r.error) } : r) as TaskResult;
}

const EMPTY: Readonly<Record<string, unknown>> = Object.freeze({});

/**
 * A suspended run's result on the wire, or a failure when its state cannot cross: a suspended
 * state holds what tools returned and asked, so it is checked before the worker tries to post it
 * (a failed post kills the worker).
 */
function suspendedResult(outcome: Extract<LoopOutcome, { status: 'suspended' }>, sent: number): unknown[] {
  try {
    serialize([outcome.request, outcome.state]);
  } catch (error) {
    const failed = new TroupeError(
      `the run suspended with a state that cannot cross a thread: ${asError(error).message}; tools and questions must hold plain data`,
      { code: 'ERR_NOT_CLONEABLE', cause: error },
    );
    return encodeSubagentResult({ status: 'failed', error: failed, state: outcome.state }, sent);
  }
  return encodeSubagentResult(outcome, sent);
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
 *
 * The supervisor's pool runs it through {@link WORKER_URL}; an application does
 * not call it.
 *
 * @example
 * ```ts
 * import { parentPort } from 'node:worker_threads'
 *
 * // A worker of your own pool, handed tasks built by the supervisor's wire format:
 * parentPort?.on('message', async (task: unknown) => parentPort?.postMessage(await runSubagentTask(task)))
 * ```
 */
export async function runSubagentTask(raw: unknown): Promise<unknown[]> {
  const decoded = decodeSubagentTask(raw);
  if (decoded.error !== undefined) {
    // The thread's buffer comes once, with its first task: kept even from a task refused here,
    // or every later task on this thread would be refused for want of it.
    const buffer = Array.isArray(raw) ? raw[TaskSlot.buffer] : undefined;
    if (buffer instanceof SharedArrayBuffer && buffer !== attached?.buffer) {
      try {
        attached = CancelSlots.attach(buffer);
      } catch {
        // Not a cancellation buffer: the next task's check reports it.
      }
    }
    return encodeSubagentFailure(
      new TroupeError(`malformed subagent task: ${decoded.error}`, { code: 'ERR_PROTOCOL' }),
      0,
    );
  }
  const task = decoded.task;
  // The scope first: a lean version is kept before anything else can fail, as the supervisor's
  // mirror of this thread counts every task it answers.
  let scope: Scope;
  let cancellation: ReturnType<typeof slotRunCancellation>;
  try {
    scope = receivedScope(task) as Scope;
    const slots = cancelSlots(task);
    const handle = { index: task.slot, generation: task.generation };
    // The deadline comes relative (the supervisor's clock may be a test clock): this thread's own base.
    const deadline = task.timeoutMs === undefined ? null : systemClock.now() + task.timeoutMs;
    cancellation = slotRunCancellation(slots, handle, { deadline, clock: systemClock });
  } catch (error) {
    return encodeSubagentFailure(error, 0);
  }
  const host = new HostLink(task.capability, cancellation);
  // Tool and model promises the run stopped waiting for: work still running here.
  let abandoned: Set<PromiseLike<unknown>> | undefined;
  const abandon = (work: PromiseLike<unknown>): void => {
    abandoned ??= new Set();
    const set = abandoned;
    set.add(work);
    const done = (): void => {
      set.delete(work);
    };
    try {
      work.then(done, done);
    } catch {
      // A thenable whose then throws never settles: it stays held.
    }
  };
  // The run's result as it goes on the wire (see encodeSubagentResult), and its last events.
  let result: unknown[];
  let tail: unknown[] | undefined;
  try {
    const agent = loadedAgent(task.module, task.agent) ?? (await loadAgent(task.module, task.agent));
    // The channels are this thread's own fresh copies (or a kept one of the
    // same scope version): frozen, never measured here.
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
            host.call(HostOp.approve, {
              toolName: request.toolName,
              toolCallId: request.toolCallId,
              arguments: request.arguments,
            }) as ReturnType<ApprovalHandler>
        : undefined;
    const spawner: TaskSpawner | undefined =
      (task.host & HostFeature.spawn) !== 0
        ? {
            runTask: (request) =>
              host
                .call(HostOp.task, {
                  subagent: request.subagent.name,
                  instructions: request.instructions,
                  toolCallId: request.toolCallId,
                  metadata: request.metadata as Record<string, unknown>,
                })
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
      answers: resume?.answers,
      approvedCalls: resume === undefined ? undefined : new Set(resume.approvedCalls),
      clock: systemClock,
      cancellation,
      approval,
      spawner,
      events: (task.host & HostFeature.telemetry) !== 0 ? telemetrySink(host, task.host) : undefined,
      onQuestion: (toolCallId, request) => host.event(['q', toolCallId, request]),
      onDelta: (task.host & HostFeature.stream) !== 0 ? (delta) => host.delta(delta) : undefined,
      abandoned: abandon,
      checkpoints: (task.host & HostFeature.durable) !== 0 ? checkpointsOver(host) : undefined,
      interrupted: resume?.started === undefined ? undefined : { started: new Set(resume.started) },
      // The watchdog bounds a model that ignores its signal here (it kills the worker after the grace).
      raceModel: false,
    });
    // The last events ride with the result (one message less per run).
    tail = host.take();
    result =
      outcome.status === 'suspended' ? suspendedResult(outcome, host.sent) : encodeSubagentResult(outcome, host.sent);
  } catch (error) {
    host.flush();
    result = encodeSubagentFailure(error, host.sent);
  }
  cancellation.close();
  if (abandoned !== undefined && abandoned.size > 0) {
    // Work of this run still runs in this thread and could wake inside the
    // next run: keep the thread (the task stays open) until it settles. The
    // supervisor has the result now, and recycles the worker if it does not
    // settle within its grace period.
    // The supervisor may take this run's end from the held result or from the task: its last events go as a batch.
    if (tail !== undefined) host.post(tail);
    // Posted (copied) at once: the same tuple then goes with the task, with what was sent by then.
    host.holding(result);
    host.close();
    await Promise.allSettled([...abandoned]);
    result[ResultSlot.sent] = host.sent;
    return result;
  }
  host.close();
  // The tail, when there is one, is the tuple's last element (after its status's own).
  if (tail !== undefined) result.push(tail);
  return result;
}
