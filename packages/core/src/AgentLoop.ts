import type { CancelToken } from './CancelToken.js';
import { CallRunner } from './internal/CallRunner.js';
import { askAgain, checkOutput, outputError } from './internal/checkOutput.js';
import { ModelTurn } from './internal/ModelTurn.js';
import { normaliseCalls } from './internal/normaliseCalls.js';
import { DEFAULT_MAX_FAILED_TURNS, type RunAgentLoopOptions } from './internal/RunAgentLoopOptions.js';
import { resumeTurn } from './internal/resumeTurn.js';
import { appendAnswer, completeTurn, type LoopOutcome, type LoopState, sealMessage } from './LoopState.js';
import type { ModelToolCall } from './Model.js';
import type { Request } from './Request.js';
import { asError } from './ToolResult.js';
import { TroupeError } from './TroupeError.js';

/**
 * Run an agent's loop: model turn → tool calls (through the executor, in
 * parallel, results kept in call order) → results appended → next turn,
 * until the model answers without tool calls (`done`), the turn limit is hit
 * (`incomplete`), a tool asks a person (`suspended`, with the state to resume
 * from), the run is cancelled, or the model fails.
 *
 * Resuming (a state with `pending` calls): each of the `answers` re-runs the
 * call that asked it, exactly once, all of them together (a declined or
 * expired answer gives that call an error result instead); with every call
 * resolved the turn completes and the loop goes on, otherwise the run
 * suspends again on the next open call.
 * A `task` call whose child suspended is open until the supervisor resolves
 * it ({@link resolveDelegatedCall}); an answer never re-runs it.
 *
 * The same function runs a parent agent on the supervisor thread and a
 * subagent in a worker; only the cancellation, approval and spawner differ.
 * Model calls and tool calls are raced against the run's cancellation, so a
 * cancelled run ends `cancelled`, never `done`. Never rejects.
 */
export async function runAgentLoop(options: RunAgentLoopOptions): Promise<LoopOutcome> {
  try {
    return await loop(options);
  } catch (error) {
    // A defect of the loop or of a callback it trusted (a spawner, a sink):
    // the run fails with it, the caller is never left with a rejection.
    return {
      status: 'failed',
      error: new TroupeError(`the agent loop failed: ${asError(error).message}`, {
        code: 'ERR_INTERNAL',
        cause: error,
      }),
      state: options.state,
    };
  }
}

/**
 * The loop itself: prepare the run (its tool calls' runner, the user's
 * message), resume a suspended turn, then model turn → tool calls → turn
 * completed, until an outcome. Its awaits are the turn's own (the model, the
 * checkpoints, the calls): each step between them is a plain function, so a
 * turn costs no async frame beyond those.
 */
async function loop(options: RunAgentLoopOptions): Promise<LoopOutcome> {
  const { agent, clock, cancellation, events } = options;
  const token = cancellation.token;
  const maxFailedTurns = options.maxFailedTurns ?? DEFAULT_MAX_FAILED_TURNS;
  const runner = new CallRunner(options);
  let state = options.input === undefined ? options.state : withInput(options.state, options.input);

  // Resume a suspended turn: answer the calls that asked, then suspend on the next open call or complete the turn.
  if (state.pending !== undefined) {
    const resumed = await resumeTurn(runner, state, options);
    if (resumed.status !== 'resumed') return resumed;
    state = resumed.state;
  } else if (options.answers !== undefined && options.answers.length > 0) {
    return {
      status: 'failed',
      error: new TroupeError(
        `this run waits on no request but was resumed with an answer to ${options.answers[0]?.answer.id}`,
        { code: 'ERR_UNKNOWN_REQUEST' },
      ),
      state,
    };
  }

  const model = new ModelTurn(options, runner.specs);
  const output = agent.output;
  let invalidAnswers = 0;
  for (;;) {
    const stopped = stopBeforeTurn(state, token, maxFailedTurns, agent.maxTurns);
    if (stopped !== undefined) return stopped;

    // The model's turn.
    const ended = model.end(await model.call(state), state);
    if (ended !== undefined) return ended;
    const message = model.message;
    const { calls, malformed } = normaliseCalls(message);
    state = appendAnswer(state, message.content, calls, model.usage);
    // Kept where the supervisor can count it should this thread die before the run reports.
    cancellation.noteUsage?.(state.usage);
    if (calls.length === 0) {
      if (output === undefined) return { status: 'done', text: message.content, state };
      // Structured output: the answer is checked; a mismatch goes back to the model, a few times.
      const checked = checkOutput(output, message.content);
      if (checked.ok) return { status: 'done', text: message.content, output: checked.value, state };
      if (!checked.retry || invalidAnswers === output.retries) {
        return { status: 'failed', error: outputError(checked.problem, invalidAnswers + 1, checked.retry), state };
      }
      invalidAnswers++;
      state = askAgain(state, checked.problem);
      continue;
    }

    // Its tool calls.
    if (runner.checkpoints !== undefined) {
      try {
        await runner.checkpoints.beforeCalls(
          { ...state, pending: calls.map((call) => ({ call })) },
          runner.checkpointCalls(calls),
        );
      } catch (error) {
        return { status: 'failed', error: asError(error), state };
      }
    }
    const results =
      calls.length === 1
        ? [await runner.execute(state, calls[0] as ModelToolCall, malformed.get((calls[0] as ModelToolCall).id))]
        : await Promise.all(calls.map((c) => runner.execute(state, c, malformed.get(c.id))));
    const pending = runner.settle(calls, results);
    const first = pending.find((p) => p.result === undefined);
    if (first !== undefined) {
      return { status: 'suspended', request: first.request as Request, state: { ...state, pending } };
    }

    // The turn, completed with their results.
    state = completeTurn(state, pending, clock, events);
    if (runner.checkpoints !== undefined && !token.isCancelled()) {
      try {
        await runner.checkpoints.afterTurn(
          state,
          calls.map((c) => c.id),
        );
      } catch (error) {
        return { status: 'failed', error: asError(error), state };
      }
    }
    if (token.isCancelled()) return { status: 'cancelled', reason: token.reason ?? 'user', state };
  }
}

/** The state with the user's message added: a new message, so the failed-turn count starts again. */
function withInput(state: LoopState, input: string): LoopState {
  return {
    ...state,
    failedTurns: 0,
    messageStartTurn: state.turns,
    messages: [...state.messages, sealMessage({ role: 'user', content: input })],
  };
}

/** The outcome that ends the run before its next turn (cancelled, too many failed turns, the turn limit), if any. */
function stopBeforeTurn(
  state: LoopState,
  token: CancelToken,
  maxFailedTurns: number,
  maxTurns: number,
): LoopOutcome | undefined {
  if (token.isCancelled()) return { status: 'cancelled', reason: token.reason ?? 'user', state };
  if (state.failedTurns >= maxFailedTurns) {
    return {
      status: 'failed',
      error: new TroupeError(
        `the model could not recover: the tool calls of ${state.failedTurns} turns in a row all failed (last: ${lastToolError(state)})`,
        { code: 'ERR_TOOL_FAILED' },
      ),
      state,
    };
  }
  if (state.turns - (state.messageStartTurn ?? 0) >= maxTurns) return { status: 'incomplete', state };
  return undefined;
}

function lastToolError(state: LoopState): string {
  for (let i = state.messages.length - 1; i >= 0; i--) {
    const m = state.messages[i];
    if (m?.role === 'tool' && m.isError) {
      const c = m.content as { error?: unknown } | null;
      return typeof c?.error === 'string' ? c.error : 'unknown';
    }
  }
  return 'unknown';
}
