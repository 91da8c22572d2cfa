import { z } from 'zod';
import {
  type CallCancellation,
  type CancelCell,
  type CancelToken,
  onCancelled,
  type RunCancellation,
} from './CancelToken.js';
import type { Clock, TimerHandle } from './Clock.js';
import { ContextUpdate, type Operation } from './ContextUpdate.js';
import { createId, type ToolCallId } from './Id.js';
import type { Answer, Request } from './Request.js';
import { DEFERRED_TASK_KIND } from './TaskTool.js';
import type { AnyTool } from './Tool.js';
import { type AgentStateView, buildToolContext, type RunContext } from './ToolContext.js';
import type { ToolEventSink, ToolFailureKind } from './ToolEvents.js';
import { asError, checkRequest, ToolResult } from './ToolResult.js';
import { CancelledError, isTroupeError, ToolTimeoutError, TroupeError } from './TroupeError.js';

/**
 * What the approval handler is asked about.
 *
 * @example
 * ```ts
 * const approval: ApprovalHandler = (request: ApprovalRequest) =>
 *   request.parentAgentId === undefined ? { decision: 'approve' } : { decision: 'reject', reason: 'subagents may not' }
 * ```
 */
export interface ApprovalRequest {
  readonly toolName: string;
  readonly toolCallId: ToolCallId;
  readonly arguments: unknown;
  readonly agentId: RunContext['agentId'];
  readonly parentAgentId: RunContext['parentAgentId'];
  /** Who the agent acts for (set by the supervisor, which decides approvals). */
  readonly scope?: unknown;
}

/**
 * An approval handler's decision: run as asked, run with edited arguments,
 * refuse, or ask a person (the run suspends with a request of kind `approval`).
 *
 * @example
 * ```ts
 * const decide: ApprovalHandler = ({ toolName, arguments: args }) =>
 *   toolName === 'delete_file'
 *     ? { decision: 'ask', prompt: `Delete ${JSON.stringify(args)}?` }
 *     : { decision: 'approve' }
 * ApprovalDecision.parse({ decision: 'reject', reason: 'not today' }) // a valid decision
 * ```
 */
export const ApprovalDecision = z.discriminatedUnion('decision', [
  z.object({ decision: z.literal('approve') }),
  z.object({ decision: z.literal('edit'), arguments: z.unknown() }),
  z.object({ decision: z.literal('reject'), reason: z.string().optional() }),
  z.object({
    decision: z.literal('ask'),
    /** Set by the supervisor, which records the request it issues. */
    requestId: z.string().min(1).optional(),
    prompt: z.string(),
    data: z.unknown().optional(),
    expiresAt: z.number().finite().optional(),
  }),
]);
/** See the {@link ApprovalDecision} schema. */
export type ApprovalDecision = z.infer<typeof ApprovalDecision>;

/**
 * Decides whether a tool marked `requiresApproval` may run. Runs on the
 * supervisor thread only. Anything it returns that is not an
 * {@link ApprovalDecision} denies the call (with a `tool.approval.invalid` event).
 *
 * Pass it as `createSupervisor({ approval })`. Honour `signal`: it aborts when
 * the run is cancelled. A handler that throws denies the call.
 *
 * @example
 * ```ts
 * const approval: ApprovalHandler = async (request, { signal }) => {
 *   if (request.toolName !== 'refund') return { decision: 'approve' }
 *   const res = await fetch('https://policy.example/allow', { method: 'POST', body: JSON.stringify(request.arguments), signal })
 *   return res.ok ? { decision: 'approve' } : { decision: 'ask', prompt: 'Approve this refund?' }
 * }
 * ```
 */
export type ApprovalHandler = (
  request: ApprovalRequest,
  options: { readonly signal: AbortSignal },
) => ApprovalDecision | Promise<ApprovalDecision>;

/** Everything the executor needs besides the tool and its call. */
export interface ExecuteToolOptions {
  readonly clock: Clock;
  readonly run: RunContext;
  readonly state: AgentStateView;
  readonly cancellation: RunCancellation;
  /** Asked for tools with `requiresApproval`; none means denied. */
  readonly approval?: ApprovalHandler | undefined;
  /** The supervisor already approved this call (after a person said yes): do not ask again. */
  readonly preApproved?: boolean | undefined;
  /** The answer to this call's earlier `pending` request. */
  readonly answer?: Answer | undefined;
  readonly events?: ToolEventSink | undefined;
  /** The tool's index in its agent's tools: told to the cancellation so a forced stop can name it. */
  readonly toolIndex?: number | undefined;
  /**
   * Told about a call's promise the executor stopped waiting for (it timed
   * out or its run was cancelled) while it had not settled: work still
   * running in this thread that no run owns any more.
   */
  readonly abandoned?: ((work: PromiseLike<unknown>) => void) | undefined;
}

/** One tool call to execute. */
export interface ToolCallInput {
  readonly id: ToolCallId;
  readonly arguments: unknown;
}

/** How a tool call ended. */
export type ToolExecution =
  | {
      readonly status: 'ok';
      readonly value: unknown;
      readonly update: ContextUpdate | undefined;
      readonly attempts: number;
    }
  | {
      readonly status: 'error';
      readonly error: Error;
      readonly kind: ToolFailureKind;
      readonly update: ContextUpdate | undefined;
      readonly attempts: number;
    }
  | {
      readonly status: 'pending';
      readonly request: Request;
      /** True when the request is an approval question (kind `approval`). */
      readonly approval: boolean;
      readonly attempts: number;
    };

type Settled =
  | { readonly kind: 'value'; readonly value: unknown }
  | { readonly kind: 'thrown'; readonly error: unknown }
  | { readonly kind: 'timeout' }
  | { readonly kind: 'aborted' };

// A getter named `then` may throw: reading it is guarded like calling it.
function thenOf(
  v: unknown,
): ((onFulfilled: (x: unknown) => void, onRejected: (e: unknown) => void) => unknown) | undefined {
  if ((typeof v !== 'object' && typeof v !== 'function') || v === null) return undefined;
  const then = (v as { then?: unknown }).then;
  return typeof then === 'function' ? (then as never) : undefined;
}

/**
 * A tool's update, rebuilt and checked: operations on keys Troupe owns are
 * dropped (reported through `dropped`), anything that is not an update or
 * holds an unknown operation fails the call.
 */
function checkUpdate(
  update: unknown,
  dropped: (op: Operation, reason: string) => void,
): { update: ContextUpdate | undefined; error?: never } | { update?: never; error: Error } {
  if (update === undefined) return { update: undefined };
  const operations = (update as { operations?: unknown } | null)?.operations;
  if (!Array.isArray(operations)) {
    return {
      error: new TroupeError(
        'the tool returned an update that is not a ContextUpdate: build it with ContextUpdate.empty().set(...)',
        { code: 'ERR_CONTEXT_UPDATE' },
      ),
    };
  }
  if (update instanceof ContextUpdate) return { update };
  // Hand-built: rebuild each operation through the same checks a built one passed.
  const kept: Operation[] = [];
  for (const op of operations) {
    try {
      ContextUpdate.from([op]);
      kept.push(op as Operation);
    } catch (error) {
      if (isTroupeError(error, 'ERR_PROTECTED_KEY')) dropped(op as Operation, (error as Error).message);
      else return { error: error instanceof Error ? error : asError(error) };
    }
  }
  return { update: kept.length === 0 ? undefined : ContextUpdate.from(kept) };
}

// Errors Troupe's API throws for a caller's mistake: deterministic, so a retry would only repeat the tool's side effects.
const MISUSE_CODES: ReadonlySet<string> = new Set([
  'ERR_INVALID_ARGUMENT',
  'ERR_PROTECTED_KEY',
  'ERR_NOT_JSON',
  'ERR_CONTEXT_UPDATE',
  'ERR_NOT_CLONEABLE',
]);

function isMisuse(error: Error): boolean {
  return isTroupeError(error) && MISUSE_CODES.has(error.code);
}

function describeIssues(error: z.ZodError): string {
  return error.issues
    .slice(0, 5)
    .map((i) => `${i.path.length === 0 ? 'arguments' : i.path.join('.')}: ${i.message}`)
    .join('; ');
}

/**
 * Execute one tool call (nous `ToolExecutor`): approval → argument
 * validation → attempts.
 *
 * - Approval and validation failures never invoke the tool and are never retried.
 * - A thrown error is retried up to `tool.retries` times (`ctx.attempt` tells
 *   the attempts apart); a returned `ToolResult.error` is not retried, nor is
 *   a misuse of Troupe's API thrown inside the tool (`ERR_PROTECTED_KEY`,
 *   `ERR_NOT_JSON`, `ERR_CONTEXT_UPDATE`, `ERR_NOT_CLONEABLE`,
 *   `ERR_INVALID_ARGUMENT`): it would fail again, after the same side effects.
 * - A timeout is terminal: the call's token is cancelled (its `signal`
 *   aborts, `isCancelled()` turns true), the result is a `ToolTimeoutError`,
 *   and the tool is never re-run.
 * - A cancelled run ends the call with a `CancelledError` and no retry.
 *
 * Never rejects: every failure is a `status: 'error'` result.
 */
export async function executeTool(
  tool: AnyTool,
  call: ToolCallInput,
  options: ExecuteToolOptions,
): Promise<ToolExecution> {
  const { clock, events } = options;
  const started = clock.now();
  // Each event's payload is one literal: on Node 20 (V8 11.3) a literal that adds keys after a
  // spread (`{ ...base(n), durationMs }`) takes a slow path, about 1 µs a payload.
  const toolName = tool.name;
  const toolCallId = call.id;
  const agentId = options.run.agentId;
  const base = (attempt: number) => ({ toolName, toolCallId, agentId, attempt, at: clock.now() });
  let approval: 'approved' | 'edited' | 'rejected' | 'asked' | 'pre-approved' | undefined;
  const stop = (result: ToolExecution): ToolExecution => {
    // A deferred task call has not stopped: the supervisor reports its stop when its child ends.
    const deferred = result.status === 'pending' && result.request.kind === DEFERRED_TASK_KIND;
    if (!deferred && events !== undefined && events.listenerCount('tool.execute.stop') > 0) {
      events.emit('tool.execute.stop', {
        toolName,
        toolCallId,
        agentId,
        attempt: result.attempts,
        at: clock.now(),
        durationMs: clock.now() - started,
        status: result.status,
        failure: result.status === 'error' ? result.kind : undefined,
        approval,
      });
    }
    return result;
  };
  const dropped = (op: Operation, reason: string): void => {
    if (events !== undefined && events.listenerCount('context.operation_dropped') > 0) {
      events.emit('context.operation_dropped', {
        toolName,
        toolCallId,
        agentId,
        attempt: 0,
        at: clock.now(),
        op: String((op as { op?: unknown } | null)?.op),
        key: typeof (op as { key?: unknown } | null)?.key === 'string' ? (op as { key: string }).key : undefined,
        reason,
      });
    }
  };
  // A failed call, told to the `tool.execute.exception` listeners.
  const reported = (execution: FailedExecution, willRetry = false): ToolExecution => {
    if (events !== undefined && events.listenerCount('tool.execute.exception') > 0) {
      events.emit('tool.execute.exception', {
        toolName,
        toolCallId,
        agentId,
        attempt: Math.max(execution.attempts, 1),
        at: clock.now(),
        kind: execution.kind,
        willRetry,
        reason: execution.error,
        stack: execution.error.stack,
      });
    }
    return execution;
  };
  const fail = (
    error: Error,
    kind: ToolFailureKind,
    attempts: number,
    update?: ContextUpdate,
    willRetry = false,
  ): ToolExecution => reported({ status: 'error', error, kind, update, attempts }, willRetry);

  const runToken = options.cancellation.token;
  if (runToken.isCancelled()) {
    return stop(fail(new CancelledError(runToken.reason ?? 'user'), 'cancelled', 0));
  }

  // 1. Approval, decided by the handler the caller trusts (the supervisor's).
  let args = call.arguments;
  if (tool.requiresApproval && options.preApproved === true) approval = 'pre-approved';
  if (tool.requiresApproval && options.preApproved !== true) {
    const decision = await askApproval(tool, call, options);
    switch (decision.kind) {
      case 'cancelled':
        // The run was cancelled while the handler decided: the call ends now, whatever it answers later.
        return stop(fail(new CancelledError(runToken.reason ?? 'user'), 'cancelled', 0));
      case 'denied':
        approval = 'rejected';
        return stop(fail(new TroupeError(decision.message, { code: 'ERR_APPROVAL_DENIED' }), 'approval', 0));
      case 'ask':
        approval = 'asked';
        return stop({ status: 'pending', request: decision.request, approval: true, attempts: 0 });
      case 'approved':
        approval = decision.edited ? 'edited' : 'approved';
        args = decision.arguments;
        break;
    }
  }

  // 2. Validation: never invokes the tool, never retried.
  const parsed = tool.parameters.safeParse(args);
  if (!parsed.success) {
    return stop(
      fail(
        new TroupeError(`invalid arguments for tool "${tool.name}": ${describeIssues(parsed.error)}`, {
          code: 'ERR_TOOL_VALIDATION',
          cause: parsed.error,
        }),
        'validation',
        0,
      ),
    );
  }

  // 3. Attempts.
  const maxAttempts = tool.retries + 1;
  for (let attempt = 1; ; attempt++) {
    // Checked before every attempt, not only on entry: the run may have been
    // cancelled while the approval handler decided or between two attempts.
    if (runToken.isCancelled()) {
      return stop(fail(new CancelledError(runToken.reason ?? 'user'), 'cancelled', attempt - 1));
    }
    if (events !== undefined && events.listenerCount('tool.execute.start') > 0) {
      events.emit('tool.execute.start', base(attempt));
    }
    const now = clock.now();
    const callDeadline = tool.timeoutMs === null ? undefined : now + tool.timeoutMs;
    const runDeadline = options.cancellation.deadline;
    const deadline =
      callDeadline === undefined
        ? runDeadline
        : runDeadline === undefined
          ? callDeadline
          : Math.min(callDeadline, runDeadline);
    const lane = options.cancellation.openCall(
      callDeadline,
      options.toolIndex === undefined
        ? undefined
        : { toolIndex: options.toolIndex, timeoutMs: tool.timeoutMs ?? undefined },
    );
    let settled: Settled;
    try {
      const ctx = buildToolContext(options.run, {
        state: options.state,
        toolCallId: call.id,
        toolName: tool.name,
        attempt,
        deadline,
        timeoutMs: deadline === undefined ? undefined : Math.max(0, deadline - now),
        answer: options.answer,
        token: lane.token,
        cancellation: options.cancellation,
      });
      let returned: unknown;
      let then: ReturnType<typeof thenOf>;
      try {
        returned = tool.execute(parsed.data, ctx);
        then = thenOf(returned);
      } catch (error) {
        returned = undefined;
        settled = { kind: 'thrown', error };
      }
      settled ??=
        then !== undefined
          ? await settle(returned, then, lane, options.cancellation, tool.timeoutMs, clock, options.abandoned)
          : { kind: 'value', value: returned };
    } finally {
      lane.close();
    }

    // A call whose own deadline passed is a timeout, whoever noticed it first
    // (the executor's timer, the watchdog, or the tool via isCancelled()) — also
    // when the tool then returned a value: it stopped, or ran on, past its
    // deadline, and a timeout is terminal whatever it returned. (Which of the
    // executor's timer and the watchdog's cancel came first is a race; the
    // outcome must not depend on it.)
    // A tool that never yielded cannot be stopped where nothing else runs (a parent agent's, on
    // the supervisor's thread): had its deadline passed when it returned, it overran all the same.
    const laneReason = lane.token.reason;
    const overran = callDeadline !== undefined && settled.kind !== 'timeout' && clock.now() > callDeadline;
    const timedOut =
      settled.kind === 'timeout' ||
      ((laneReason === 'deadline' || overran) && !runToken.isCancelled() && tool.timeoutMs !== null);
    if (timedOut) {
      const timeoutMs = tool.timeoutMs ?? 0;
      if (events !== undefined && events.listenerCount('tool.execute.timeout') > 0) {
        events.emit('tool.execute.timeout', { toolName, toolCallId, agentId, attempt, at: clock.now(), timeoutMs });
      }
      return stop(fail(new ToolTimeoutError(tool.name, timeoutMs), 'timeout', attempt));
    }
    if (settled.kind === 'aborted' || (settled.kind === 'thrown' && runToken.isCancelled())) {
      const reason = runToken.reason ?? laneReason ?? 'user';
      return stop(fail(new CancelledError(reason), 'cancelled', attempt));
    }
    if (settled.kind === 'thrown') {
      const error = asError(settled.error);
      if (isTroupeError(error, 'ERR_CANCELLED')) {
        // The tool threw a cancellation of its own (or of a subcall): an interruption, not retried.
        return stop(fail(error, 'cancelled', attempt));
      }
      // A misuse of Troupe's own API inside the tool (a protected key, a value JSON cannot carry,
      // a bad argument) fails the same way every time: not retried, so its side effects run once.
      const willRetry = attempt < maxAttempts && !isMisuse(error);
      const result = fail(error, 'thrown', attempt, undefined, willRetry);
      if (willRetry) continue;
      return stop(result);
    }
    const value = (settled as { readonly value: unknown }).value;
    if (ToolResult.is(value)) {
      const execution = returnedExecution(value, attempt, dropped);
      return stop(execution.status === 'error' ? reported(execution) : execution);
    }
    return stop({ status: 'ok', value, update: undefined, attempts: attempt });
  }
}

type FailedExecution = Extract<ToolExecution, { readonly status: 'error' }>;

/**
 * What a tool's returned {@link ToolResult} comes to, its update checked
 * (operations on keys Troupe owns dropped, told to `dropped`). Pure: a `task`
 * call resumed with its child's result (`resolvedCall`) is read the way a
 * live call's is.
 */
export function returnedExecution(
  value: ToolResult<unknown>,
  attempt: number,
  dropped: (op: Operation, reason: string) => void,
): ToolExecution {
  switch (value.status) {
    case 'ok': {
      const checked = checkUpdate(value.update, dropped);
      if (checked.error !== undefined) return failed(checked.error, attempt);
      return { status: 'ok', value: value.value, update: checked.update, attempts: attempt };
    }
    case 'error': {
      const checked = checkUpdate(value.update, dropped);
      if (checked.error !== undefined) return failed(checked.error, attempt);
      return failed(asError(value.error), attempt, checked.update);
    }
    case 'pending': {
      // Checked again: a result with the ToolResult mark can be built by hand (the mark is a
      // registered symbol), skipping ToolResult.pending's check. A run suspended on a request
      // the host cannot show or save would wait for ever (on a worker, its result is refused).
      const request = checkRequest(value.request, 'the tool returned a pending result whose request is malformed');
      if (request instanceof Error) return failed(request, attempt);
      return { status: 'pending', request, approval: false, attempts: attempt };
    }
    default:
      return failed(
        new TroupeError('the tool returned a ToolResult of unknown status: build it with ToolResult.ok/error/pending', {
          code: 'ERR_TOOL_FAILED',
        }),
        attempt,
      );
  }
}

/** A returned result that fails the call. */
function failed(error: Error, attempts: number, update?: ContextUpdate): FailedExecution {
  return { status: 'error', error, kind: 'returned', update, attempts };
}

// Timeout and cancellation both abort the call (its token) and end it at
// once; the tool is never re-run. A tool that ignores its signal keeps
// running on its own: in a worker the watchdog kills it after the grace period.
function settle(
  returned: unknown,
  then: NonNullable<ReturnType<typeof thenOf>>,
  lane: CallCancellation,
  cancellation: RunCancellation,
  timeoutMs: number | null,
  clock: Clock,
  abandoned: ExecuteToolOptions['abandoned'],
): Promise<Settled> {
  return new Promise<Settled>((resolve) => {
    let done = false;
    let workDone = false;
    let timer: TimerHandle | undefined;
    // What the run's cancellation reaches: emptied when the call settles (see below).
    const cell: CancelCell = { fn: undefined };
    const finish = (s: Settled): void => {
      if (done) return;
      done = true;
      cell.fn = undefined;
      if (timer !== undefined) clock.clearTimeout(timer);
      // Stopped waiting while the tool's promise runs on: tell whoever owns the thread.
      if (!workDone && abandoned !== undefined && (s.kind === 'timeout' || s.kind === 'aborted')) {
        abandoned(returned as PromiseLike<unknown>);
      }
      resolve(s);
    };
    cell.fn = () => finish({ kind: 'aborted' });
    if (timeoutMs !== null) {
      timer = clock.setTimeout(() => {
        // Timeout is a cancellation: abort the loser, then report.
        lane.cancel('deadline');
        finish({ kind: 'timeout' });
      }, timeoutMs);
    }
    try {
      then.call(
        returned,
        (value) => {
          workDone = true;
          finish({ kind: 'value', value });
        },
        (error: unknown) => {
          workDone = true;
          finish({ kind: 'thrown', error });
        },
      );
    } catch (error) {
      // A thenable whose `then` throws: the tool failed, it did not crash the run.
      workDone = true;
      finish({ kind: 'thrown', error });
    }
    // Every async call of the run races against the run token's one promise (no
    // AbortSignal and no listener per call), through a cell emptied when the call
    // settles: the run keeps nothing of a settled call.
    if (!done) onCancelled(cancellation.token, cell);
  });
}

type ApprovalOutcome =
  | { readonly kind: 'approved'; readonly arguments: unknown; readonly edited: boolean }
  | { readonly kind: 'denied'; readonly message: string }
  | { readonly kind: 'ask'; readonly request: Request }
  | { readonly kind: 'cancelled' };

/** What {@link raceCancellation} resolves with when the token won. */
const CANCELLED: unique symbol = Symbol('cancelled');

/**
 * `pending`, or {@link CANCELLED} as soon as `token` is cancelled (through the
 * run token's one promise, like a tool call: nothing of the call is kept once
 * it settles). A thenable whose `then` throws rejects.
 */
function raceCancellation(pending: PromiseLike<unknown>, token: CancelToken): Promise<unknown> {
  return new Promise<unknown>((resolve, reject) => {
    const cell: CancelCell = { fn: () => resolve(CANCELLED) };
    pending.then(
      (value) => {
        cell.fn = undefined;
        resolve(value);
      },
      (error: unknown) => {
        cell.fn = undefined;
        reject(error);
      },
    );
    onCancelled(token, cell);
  });
}

/**
 * The reason a host gives for a rejection when no approval handler is configured (a worker's
 * tool asks its host, which has none): worded as the in-process case is.
 */
export const NO_APPROVAL_HANDLER = 'no approval handler is configured';

function noApprovalHandler(name: string): string {
  return `tool "${name}" requires approval and no approval handler is configured: denied (pass createSupervisor({ approval }) to decide)`;
}

async function askApproval(tool: AnyTool, call: ToolCallInput, options: ExecuteToolOptions): Promise<ApprovalOutcome> {
  const handler = options.approval;
  if (handler === undefined) {
    return {
      kind: 'denied',
      message: noApprovalHandler(tool.name),
    };
  }
  // The handler may wait on a person or a service: the run's cancellation ends the wait (a
  // handler that ignores its signal must not pin a cancelled run, or a shutdown).
  const token = options.cancellation.token;
  if (token.isCancelled()) return { kind: 'cancelled' };
  let raw: unknown;
  try {
    const asked: unknown = handler(
      {
        toolName: tool.name,
        toolCallId: call.id,
        arguments: call.arguments,
        agentId: options.run.agentId,
        parentAgentId: options.run.parentAgentId,
      },
      { signal: token.signal },
    );
    raw = thenOf(asked) === undefined ? asked : await raceCancellation(asked as PromiseLike<unknown>, token);
  } catch (error) {
    return {
      kind: 'denied',
      message: `the approval handler threw for tool "${tool.name}": ${error instanceof Error ? error.message : String(error)}; denied`,
    };
  }
  if (raw === CANCELLED) return { kind: 'cancelled' };
  const decision = ApprovalDecision.safeParse(raw);
  if (!decision.success) {
    const { events, clock } = options;
    if (events !== undefined && events.listenerCount('tool.approval.invalid') > 0) {
      let received: string;
      try {
        received = JSON.stringify(raw) ?? String(raw);
      } catch {
        received = String(raw);
      }
      events.emit('tool.approval.invalid', {
        toolName: tool.name,
        toolCallId: call.id,
        agentId: options.run.agentId,
        attempt: 0,
        at: clock.now(),
        received,
      });
    }
    return {
      kind: 'denied',
      message: `the approval handler returned something that is not a decision for tool "${tool.name}": denied (return { decision: 'approve' | 'edit' | 'reject' | 'ask' })`,
    };
  }
  const d = decision.data;
  switch (d.decision) {
    case 'approve':
      return { kind: 'approved', arguments: call.arguments, edited: false };
    case 'edit':
      return { kind: 'approved', arguments: d.arguments, edited: true };
    case 'reject':
      return {
        kind: 'denied',
        message:
          d.reason === NO_APPROVAL_HANDLER
            ? noApprovalHandler(tool.name)
            : `tool "${tool.name}" was rejected by the approval handler${d.reason ? `: ${d.reason}` : ''}`,
      };
    case 'ask': {
      const request: Request = {
        id: d.requestId ?? createId('req'),
        kind: 'approval',
        prompt: d.prompt,
        data: d.data ?? { toolName: tool.name, arguments: call.arguments },
        ...(d.expiresAt === undefined ? {} : { expiresAt: d.expiresAt }),
      };
      return { kind: 'ask', request };
    }
  }
}
