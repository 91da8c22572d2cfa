import { type CancelCell, type CancelToken, onCancelled } from '../CancelToken.js';
import type { Clock } from '../Clock.js';
import type { AgentId } from '../Id.js';
import type { LoopEventSink } from '../LoopEvents.js';
import type { LoopOutcome, LoopState } from '../LoopState.js';
import type { AssistantMessage, Message, Model, ModelDelta, ModelRequest, ModelResponse } from '../Model.js';
import type { OutputSpec } from '../OutputSpec.js';
import { asError } from '../ToolResult.js';
import type { ToolSpec } from '../ToolSpec.js';
import { CancelledError, type CancelReason, isTroupeError, TroupeError } from '../TroupeError.js';
import type { Usage } from '../Usage.js';
import { FactoryModel } from './FactoryModel.js';
import type { RunAgentLoopOptions } from './RunAgentLoopOptions.js';

/**
 * A model request whose `signal` is created on first read (a signal over a
 * shared slot costs a waitAsync bridge). A class, not an object literal with a
 * getter: this is built on every model turn.
 */
class LazySignalRequest implements ModelRequest {
  readonly messages: readonly Message[];
  readonly tools: readonly ToolSpec[];
  readonly onDelta: ((delta: ModelDelta) => void) | undefined;
  readonly output: OutputSpec | undefined;
  readonly #token: CancelToken;
  constructor(
    messages: readonly Message[],
    tools: readonly ToolSpec[],
    token: CancelToken,
    onDelta: ((delta: ModelDelta) => void) | undefined,
    output: OutputSpec | undefined,
  ) {
    this.messages = messages;
    this.tools = tools;
    this.#token = token;
    this.onDelta = onDelta;
    this.output = output;
  }
  get signal(): AbortSignal {
    return this.#token.signal;
  }
}

export type ModelCall =
  | { readonly kind: 'answered'; readonly response: ModelResponse | undefined }
  | { readonly kind: 'threw'; readonly error: unknown }
  | { readonly kind: 'cancelled'; readonly reason: CancelReason };

/**
 * Call the model, raced against the run's cancellation: a model that ignores
 * its signal cannot hold a cancelled run (its promise is reported as
 * abandoned and left to settle on its own).
 */
function callModel(
  generate: () => Promise<ModelResponse>,
  token: CancelToken,
  abandoned: ((work: PromiseLike<unknown>) => void) | undefined,
  race: boolean,
): Promise<ModelCall> {
  let promise: Promise<ModelResponse>;
  try {
    promise = generate();
  } catch (error) {
    return Promise.resolve({ kind: 'threw', error });
  }
  if (typeof (promise as { then?: unknown } | null)?.then !== 'function') {
    return Promise.resolve({ kind: 'answered', response: promise as unknown as ModelResponse });
  }
  if (!race) {
    return Promise.resolve(promise).then(
      (response): ModelCall => ({ kind: 'answered', response }),
      (error: unknown): ModelCall => ({ kind: 'threw', error }),
    );
  }
  return new Promise<ModelCall>((resolve) => {
    let done = false;
    const cell: CancelCell = { fn: undefined };
    cell.fn = (reason) => {
      if (done) return;
      done = true;
      abandoned?.(promise);
      resolve({ kind: 'cancelled', reason });
    };
    promise.then(
      (response) => {
        cell.fn = undefined;
        if (done) return;
        done = true;
        resolve({ kind: 'answered', response });
      },
      (error: unknown) => {
        cell.fn = undefined;
        if (done) return;
        done = true;
        resolve({ kind: 'threw', error });
      },
    );
    if (!done) onCancelled(token, cell);
  });
}

/**
 * The model's side of a run's turns, made once per run: each turn emits
 * `agent.turn` and `model.start`, calls the model with the state's messages
 * and the run's tools ({@link callModel}), and reads what it answered —
 * `model.stop` or `model.error`, and the outcome when the answer ends the
 * run. The deltas are timed only when the turn's end is observed.
 */
export class ModelTurn {
  readonly #options: RunAgentLoopOptions;
  readonly #model: Model;
  readonly #specs: readonly ToolSpec[];
  readonly #output: OutputSpec | undefined;
  /** The current turn (1-based over the conversation). */
  #turn = 0;
  /** A `model.stop` or `model.error` listener was there when the turn started. */
  #observed = false;
  #started = 0;
  #firstDelta: number | undefined;
  #message: AssistantMessage | undefined;
  #usage: Usage | undefined;

  constructor(options: RunAgentLoopOptions, specs: readonly ToolSpec[]) {
    this.#options = options;
    const model = options.agent.model;
    // A model factory makes its model here, on the thread that runs the agent, at its first run
    // here (its events then name the model); a failure fails the first model call.
    if (model instanceof FactoryModel) model.prime();
    this.#model = model;
    this.#specs = specs;
    this.#output = options.agent.output?.spec;
  }

  /** The assistant message of the turn {@link ModelTurn.end} let the run go on with. */
  get message(): AssistantMessage {
    return this.#message as AssistantMessage;
  }

  /** The tokens of that turn, as the model reported them. */
  get usage(): Usage | undefined {
    return this.#usage;
  }

  /** Start the turn after `state`: its events, then the model call. */
  call(state: LoopState): Promise<ModelCall> {
    const { clock, events } = this.#options;
    const model = this.#model;
    const token = this.#options.cancellation.token;
    const turn = state.turns + 1;
    if (events !== undefined && events.listenerCount('agent.turn') > 0) {
      events.emit('agent.turn', { agentId: state.agentId, turn, at: clock.now() });
    }
    const observed =
      events !== undefined && (events.listenerCount('model.stop') > 0 || events.listenerCount('model.error') > 0);
    const started = observed || (events !== undefined && events.listenerCount('model.start') > 0) ? clock.now() : 0;
    if (events !== undefined && events.listenerCount('model.start') > 0) {
      events.emit('model.start', {
        agentId: state.agentId,
        model: model.name,
        provider: model.provider,
        turn,
        at: started,
      });
    }
    this.#turn = turn;
    this.#observed = observed;
    this.#started = started;
    this.#firstDelta = undefined;
    const onDelta = this.#options.onDelta;
    const deltas =
      onDelta === undefined
        ? undefined
        : observed
          ? (delta: ModelDelta) => {
              // A delta of an earlier turn's model, sent after its answer, times nothing.
              if (this.#turn === turn) this.#firstDelta ??= clock.now();
              onDelta(delta);
            }
          : onDelta;
    const messages = state.messages;
    const specs = this.#specs;
    const output = this.#output;
    return callModel(
      () => model.generate(new LazySignalRequest(messages, specs, token, deltas, output)),
      token,
      this.#options.abandoned,
      this.#options.raceModel !== false,
    );
  }

  /**
   * Read the turn's model call: the outcome when it ends the run (cancelled;
   * failed, on a model error or an answer that is not an assistant message),
   * after `model.error`; otherwise `model.stop`, and undefined — the run goes
   * on with {@link ModelTurn.message} and {@link ModelTurn.usage}.
   */
  end(call: ModelCall, state: LoopState): LoopOutcome | undefined {
    const { clock } = this.#options;
    const model = this.#model;
    const token = this.#options.cancellation.token;
    const turn = this.#turn;
    const started = this.#started;
    // Set only when the turn's end is observed (there is a sink).
    const events = this.#observed ? this.#options.events : undefined;
    if (call.kind === 'cancelled' || token.isCancelled()) {
      if (events !== undefined)
        modelError(
          events,
          state.agentId,
          model,
          turn,
          started,
          clock,
          new CancelledError(token.reason ?? 'user'),
          true,
          undefined,
        );
      return {
        status: 'cancelled',
        reason: token.reason ?? (call.kind === 'cancelled' ? call.reason : 'user'),
        state,
      };
    }
    let message: AssistantMessage;
    let usage: Usage | undefined;
    try {
      if (call.kind === 'threw') throw call.error;
      const response = call.response;
      message = response?.message as AssistantMessage;
      usage = response?.usage;
      if (
        typeof message !== 'object' ||
        message === null ||
        typeof (message as { content?: unknown }).content !== 'string'
      ) {
        throw new TroupeError(
          'the model returned no assistant message (expected { message: { role, content, toolCalls? } })',
          {
            code: 'ERR_MODEL',
          },
        );
      }
      if (events !== undefined && events.listenerCount('model.stop') > 0) {
        const info = response?.info;
        const firstDelta = this.#firstDelta;
        events.emit('model.stop', {
          agentId: state.agentId,
          model: model.name,
          provider: model.provider,
          turn,
          at: clock.now(),
          durationMs: clock.now() - started,
          usage,
          responseModel: info?.model,
          timeToFirstTokenMs: info?.timeToFirstTokenMs ?? (firstDelta === undefined ? undefined : firstDelta - started),
          attempts: info?.attempts,
          finishReason: info?.finishReason,
          toolCalls: Array.isArray(message.toolCalls) ? message.toolCalls.length : 0,
        });
      }
    } catch (error) {
      const err =
        error instanceof Error
          ? isTroupeError(error)
            ? error
            : new TroupeError(`the model failed: ${error.message}`, { code: 'ERR_MODEL', cause: error })
          : new TroupeError(`the model failed: ${asError(error).message}`, { code: 'ERR_MODEL', cause: error });
      if (events !== undefined) {
        const attempts = (error as { attempts?: unknown } | null)?.attempts;
        modelError(
          events,
          state.agentId,
          model,
          turn,
          started,
          clock,
          err,
          false,
          typeof attempts === 'number' ? attempts : undefined,
        );
      }
      return { status: 'failed', error: err, state };
    }
    this.#message = message;
    this.#usage = usage;
    return undefined;
  }
}

function modelError(
  events: LoopEventSink | undefined,
  agentId: AgentId,
  model: { readonly name?: string | undefined; readonly provider?: string | undefined },
  turn: number,
  started: number,
  clock: Clock,
  error: Error,
  cancelled: boolean,
  attempts: number | undefined,
): void {
  if (events === undefined || events.listenerCount('model.error') === 0) return;
  const at = clock.now();
  events.emit('model.error', {
    agentId,
    model: model.name,
    provider: model.provider,
    turn,
    at,
    durationMs: at - started,
    error,
    cancelled,
    attempts,
  });
}
