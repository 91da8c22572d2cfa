import { completeTurn, type LoopOutcome, type LoopState, type PendingCall } from '../LoopState.js';
import type { ModelToolCall } from '../Model.js';
import type { Answer, Request } from '../Request.js';
import { asError } from '../ToolResult.js';
import { TroupeError } from '../TroupeError.js';
import type { CallResult } from './CallResult.js';
import type { CallRunner } from './CallRunner.js';
import { errorContent } from './errorContent.js';
import type { ResumeAnswer, RunAgentLoopOptions } from './RunAgentLoopOptions.js';

/** How many open questions an error names before it counts the rest. */
const DESCRIBED_OPEN = 5;

/** A suspended turn that completed on resume: the run goes on from `state`. */
export interface Resumed {
  readonly status: 'resumed';
  readonly state: LoopState;
}

/**
 * Resume the suspended turn in `state.pending`: after a crash, re-run what
 * may be re-run of its open calls (`options.interrupted`); with answers,
 * answer the calls that asked, together; then suspend on the next open call,
 * or complete the turn (saved by `afterTurn` unless the run was cancelled).
 */
export async function resumeTurn(
  runner: CallRunner,
  state: LoopState,
  options: RunAgentLoopOptions,
): Promise<LoopOutcome | Resumed> {
  const pending = [...(state.pending as readonly PendingCall[])];
  const answers = options.answers;
  if (options.interrupted !== undefined) {
    const failed = await rerunInterrupted(runner, state, pending, options.interrupted);
    if (failed !== undefined) return failed;
  } else if (answers !== undefined && answers.length > 0) {
    const failed = await answerOpenCalls(runner, state, pending, answers);
    if (failed !== undefined) return failed;
  }
  const next = pending.find((p) => p.result === undefined);
  if (next !== undefined) {
    return { status: 'suspended', request: next.request as Request, state: { ...state, pending } };
  }
  const completed = completeTurn({ ...state, pending: undefined }, pending, options.clock, options.events);
  // A cancelled turn is not committed: its calls stay started (a shutdown's read as interrupted).
  if (runner.checkpoints !== undefined && !options.cancellation.token.isCancelled()) {
    try {
      await runner.checkpoints.afterTurn(
        completed,
        pending.map((p) => p.call.id),
      );
    } catch (error) {
      return { status: 'failed', error: asError(error), state: completed };
    }
  }
  return { status: 'resumed', state: completed };
}

/**
 * Resume a run a crash interrupted: each open call that had started gets an
 * `ERR_INTERRUPTED` error result (its side effect may have happened) unless
 * its tool is idempotent; the others run now. Fills `pending` in place.
 */
async function rerunInterrupted(
  runner: CallRunner,
  state: LoopState,
  pending: PendingCall[],
  interrupted: NonNullable<RunAgentLoopOptions['interrupted']>,
): Promise<LoopOutcome | undefined> {
  const started = interrupted.started;
  const rerun: number[] = [];
  for (let i = 0; i < pending.length; i++) {
    const p = pending[i] as PendingCall;
    if (p.result !== undefined) continue;
    if (started.has(p.call.id) && runner.toolNamed(p.call.name)?.idempotent !== true) {
      const error = new TroupeError(
        `tool "${p.call.name}" was interrupted by a restart after it started; it is not re-run (its side effect may have happened): check, then call it again if needed`,
        { code: 'ERR_INTERRUPTED' },
      );
      pending[i] = {
        call: p.call,
        result: {
          role: 'tool',
          toolCallId: p.call.id,
          name: p.call.name,
          content: errorContent(error),
          isError: true,
        },
        usage: interrupted.lost?.get(p.call.id),
      };
    } else rerun.push(i);
  }
  if (rerun.length > 0) {
    const calls = rerun.map((i) => (pending[i] as PendingCall).call);
    if (runner.checkpoints !== undefined) {
      try {
        await runner.checkpoints.beforeCalls({ ...state, pending }, runner.checkpointCalls(calls));
      } catch (error) {
        return { status: 'failed', error: asError(error), state };
      }
    }
    const results = await Promise.all(calls.map((c) => runner.execute(state, c, undefined)));
    rerun.forEach((at, k) => {
      pending[at] = runner.pendingOf(calls[k] as ModelToolCall, results[k] as CallResult);
    });
  }
  return undefined;
}

/**
 * Answer the open calls that asked `answers`' questions, all in one resume:
 * each answered call re-runs exactly once with its own answer (together, in
 * parallel, after one checkpoint that marks them all started), or gets an
 * error result when its answer declines or came after its question expired.
 * Every answer is matched before anything runs: one that names no open
 * question of this run (or a question answered twice) fails the run, and
 * nothing re-runs. One pass over `pending` however many answers there are.
 * Fills `pending` in place.
 */
async function answerOpenCalls(
  runner: CallRunner,
  state: LoopState,
  pending: PendingCall[],
  answers: readonly ResumeAnswer[],
): Promise<LoopOutcome | undefined> {
  // The open calls of the run's own by the question they wait on (the first, should two name one).
  const byRequest = new Map<string, number>();
  for (let i = 0; i < pending.length; i++) {
    const p = pending[i] as PendingCall;
    if (p.result !== undefined || p.delegated === true || p.request === undefined) continue;
    if (!byRequest.has(p.request.id)) byRequest.set(p.request.id, i);
  }
  const at: number[] = [];
  for (const a of answers) {
    const i = byRequest.get(a.answer.id);
    if (i === undefined) {
      return {
        status: 'failed',
        error: new TroupeError(
          `this run waits on ${describeOpen(pending)} but was resumed with an answer to ${a.answer.id}`,
          { code: 'ERR_UNKNOWN_REQUEST' },
        ),
        state,
      };
    }
    // Taken: a second answer to the same question names no open one.
    byRequest.delete(a.answer.id);
    at.push(i);
  }
  const rerun: number[] = [];
  const rerunAnswers: Answer[] = [];
  answers.forEach((a, k) => {
    const i = at[k] as number;
    const open = pending[i] as PendingCall;
    if (a.expired || !a.answer.ok) pending[i] = runner.pendingOf(open.call, refusedResult(open, a));
    else {
      rerun.push(i);
      rerunAnswers.push(a.answer);
    }
  });
  if (rerun.length === 0) return undefined;
  // Re-run each pending tool exactly once. An approval answer is not the tool's own answer:
  // the call runs pre-approved (if the supervisor says so) as if first called.
  const calls = rerun.map((i) => (pending[i] as PendingCall).call);
  if (runner.checkpoints !== undefined) {
    // Marked started again: a crash during these re-runs must not repeat them.
    try {
      await runner.checkpoints.beforeCalls({ ...state, pending }, runner.checkpointCalls(calls));
    } catch (error) {
      return { status: 'failed', error: asError(error), state };
    }
  }
  const results = await Promise.all(
    rerun.map((i, k) =>
      runner.execute(state, calls[k] as ModelToolCall, undefined, rerunAnswers[k], pending[i]?.approval === true),
    ),
  );
  rerun.forEach((i, k) => {
    pending[i] = runner.pendingOf(calls[k] as ModelToolCall, results[k] as CallResult);
  });
  return undefined;
}

/** The error result of a call whose answer declined, or came after its question expired. */
function refusedResult(open: PendingCall, a: ResumeAnswer): CallResult {
  const request = open.request as Request;
  const error = a.expired
    ? new TroupeError(`request ${request.id} expired before it was answered`, { code: 'ERR_REQUEST_EXPIRED' })
    : new TroupeError(
        `${open.approval === true ? 'approval was declined' : 'the request was declined'}${a.answer.reason ? `: ${a.answer.reason}` : ''}`,
        { code: open.approval === true ? 'ERR_APPROVAL_DENIED' : 'ERR_REQUEST_DECLINED' },
      );
  return {
    message: {
      role: 'tool',
      toolCallId: open.call.id,
      name: open.call.name,
      content: errorContent(error),
      isError: true,
    },
    operations: undefined,
    request: undefined,
    approval: false,
    failed: true,
  };
}

/** What the run waits on, for an error (the first few of its open questions: a turn may hold thousands). */
function describeOpen(pending: readonly PendingCall[]): string {
  const open: (string | undefined)[] = [];
  let more = 0;
  for (const p of pending) {
    if (p.result !== undefined || p.delegated === true) continue;
    if (open.length < DESCRIBED_OPEN) open.push(p.request?.id);
    else more++;
  }
  if (open.length === 0) return 'no request of its own';
  return `request ${open.join(', ')}${more === 0 ? '' : ` and ${more} more`}`;
}
