import type { Agent } from '../Agent.js';
import type { RunCancellation } from '../CancelToken.js';
import type { Clock } from '../Clock.js';
import type { ApprovalHandler } from '../executeTool.js';
import type { LoopEventSink } from '../LoopEvents.js';
import type { LoopState } from '../LoopState.js';
import type { ModelDelta } from '../Model.js';
import type { Answer, Request } from '../Request.js';
import type { TaskSpawner } from '../TaskTool.js';
import type { RunContext } from '../ToolContext.js';
import type { Usage } from '../Usage.js';
import type { TurnCheckpoints } from './TurnCheckpoints.js';

/**
 * One answer a suspended run is resumed with: the answer to one of its own
 * questions, and whether the supervisor found that question expired when it
 * was answered (the call then gets an error result).
 */
export interface ResumeAnswer {
  readonly answer: Answer;
  readonly expired: boolean;
}

/** Default: consecutive all-failed turns after which a run fails. */
export const DEFAULT_MAX_FAILED_TURNS = 3;

/** Options of {@link runAgentLoop}. */
export interface RunAgentLoopOptions {
  readonly agent: Agent;
  readonly run: RunContext;
  readonly state: LoopState;
  /** A user message to add before the first turn. */
  readonly input?: string | undefined;
  /**
   * Resume the suspended turn in `state.pending` with these answers, each to
   * a different open call of the run's own: every answered call re-runs
   * exactly once with its answer (or gets its error result), together.
   */
  readonly answers?: readonly ResumeAnswer[] | undefined;
  /** Tool calls the supervisor itself approved (never taken from the state). */
  readonly approvedCalls?: ReadonlySet<string> | undefined;
  readonly clock: Clock;
  readonly cancellation: RunCancellation;
  readonly approval?: ApprovalHandler | undefined;
  /** Runs delegated tasks; without it an agent's subagents are not offered. */
  readonly spawner?: TaskSpawner | undefined;
  readonly events?: LoopEventSink | undefined;
  /** Consecutive turns whose tool calls all fail before the run fails. Default 3. */
  readonly maxFailedTurns?: number | undefined;
  /**
   * Called as soon as one of the run's own tools asks a person (returns
   * `pending`, or its approval handler asks), while the turn's other calls
   * go on: the host can see the question before the run suspends.
   */
  readonly onQuestion?: ((toolCallId: string, request: Request) => void) | undefined;
  /** Receives the model's streamed deltas, in order (given to the model as `onDelta`). */
  readonly onDelta?: ((delta: ModelDelta) => void) | undefined;
  /** Told about a tool or model promise the loop stopped waiting for while it ran on (see `executeTool`). */
  readonly abandoned?: ((work: PromiseLike<unknown>) => void) | undefined;
  /**
   * Race each model call against the run's cancellation (default true). Off
   * where something else bounds a model that ignores its signal — a worker,
   * whose watchdog kills it after the grace period — so that a run does not
   * pay a cancellation bridge per model call for nothing: the outcome is
   * still `cancelled` once the call returns.
   */
  readonly raceModel?: boolean | undefined;
  /** Save each turn durably (see {@link TurnCheckpoints}); none: nothing is saved mid-run. */
  readonly checkpoints?: TurnCheckpoints | undefined;
  /**
   * Resume a run a crash interrupted, from a state saved by `beforeCalls`:
   * each open call in `started` gets an `ERR_INTERRUPTED` error result
   * (its side effect may have happened) unless its tool is `idempotent`;
   * the others run now. `lost`: what the subagent of a started call had
   * spent when the crash cut it off, kept on that call's result.
   */
  readonly interrupted?:
    | { readonly started: ReadonlySet<string>; readonly lost?: ReadonlyMap<string, Usage> | undefined }
    | undefined;
}
