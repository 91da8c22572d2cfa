import { completeTurn, type LoopOutcome, type LoopState, type PendingCall } from '../LoopState.js';
import type { ModelToolCall } from '../Model.js';
import type { Answer, Request } from '../Request.js';
import { asError } from '../ToolResult.js';
import { TroupeError } from '../TroupeError.js';
import type { CallResult } from './CallResult.js';
import type { CallRunner } from './CallRunner.js';
import { errorContent } from './errorContent.js';
import type { RunAgentLoopOptions } from './RunAgentLoopOptions.js';

/** A suspended turn that completed on resume: the run goes on from `state`. */
export interface Resumed {
  readonly status: 'resumed';
  readonly state: LoopState;
}

/**
 * Resume the suspended turn in `state.pending`: after a crash, re-run what
 * may be re-run of its open calls (`options.interrupted`); with an answer,
 * answer the call that asked; then suspend on the next open call, or
 * complete the turn (saved by `afterTurn` unless the run was cancelled).
 */
export async function resumeTurn(
  runner: CallRunner,
  state: LoopState,
  options: RunAgentLoopOptions,
): Promise<LoopOutcome | Resumed> {
  const pending = [...(state.pending as readonly PendingCall[])];
  const answer = options.answer;
  if (options.interrupted !== undefined) {
    const failed = await rerunInterrupted(runner, state, pending, options.interrupted);
    if (failed !== undefined) return failed;
  } else if (answer !== undefined) {
    const failed = await answerOpenCall(runner, state, pending, answer, options.expired === true);
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
 * Answer the open call that asked `answer`'s question: re-run it exactly
 * once with the answer, or give it an error result when the answer declines
 * or came after the question expired. Fills `pending` in place.
 */
async function answerOpenCall(
  runner: CallRunner,
  state: LoopState,
  pending: PendingCall[],
  answer: Answer,
  expired: boolean,
): Promise<LoopOutcome | undefined> {
  const at = pending.findIndex((p) => p.result === undefined && p.delegated !== true && p.request?.id === answer.id);
  const open = pending[at];
  if (open === undefined) {
    return {
      status: 'failed',
      error: new TroupeError(
        `this run waits on ${describeOpen(pending)} but was resumed with an answer to ${answer.id}`,
        { code: 'ERR_UNKNOWN_REQUEST' },
      ),
      state,
    };
  }
  let result: CallResult;
  if (expired || !answer.ok) {
    const request = open.request as Request;
    const error = expired
      ? new TroupeError(`request ${request.id} expired before it was answered`, { code: 'ERR_REQUEST_EXPIRED' })
      : new TroupeError(
          `${open.approval === true ? 'approval was declined' : 'the request was declined'}${answer.reason ? `: ${answer.reason}` : ''}`,
          { code: open.approval === true ? 'ERR_APPROVAL_DENIED' : 'ERR_REQUEST_DECLINED' },
        );
    result = {
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
  } else {
    // Re-run the pending tool exactly once. An approval answer is not the tool's own answer:
    // the call runs pre-approved (if the supervisor says so) as if first called.
    if (runner.checkpoints !== undefined) {
      // Marked started again: a crash during this re-run must not repeat it.
      try {
        await runner.checkpoints.beforeCalls({ ...state, pending }, runner.checkpointCalls([open.call]));
      } catch (error) {
        return { status: 'failed', error: asError(error), state };
      }
    }
    result = await runner.execute(state, open.call, undefined, answer, open.approval === true);
  }
  pending[at] = runner.pendingOf(open.call, result);
  return undefined;
}

function describeOpen(pending: readonly PendingCall[]): string {
  const open = pending.filter((p) => p.result === undefined && p.delegated !== true).map((p) => p.request?.id);
  return open.length === 0 ? 'no request of its own' : `request ${open.join(', ')}`;
}
