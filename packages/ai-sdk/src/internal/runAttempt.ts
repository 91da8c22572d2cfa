import type { LanguageModelV4, LanguageModelV4CallOptions, LanguageModelV4StreamPart } from '@ai-sdk/provider';
import type { Clock, ModelDelta, TimerHandle } from '@troupe/core';
import { type AbortCause, type AttemptFailure, classifyFailure, streamFailure } from './AttemptFailure.js';
import { type AssembledAnswer, PartAccumulator } from './PartAccumulator.js';

/** What one attempt needs. */
export interface AttemptInput {
  readonly model: LanguageModelV4;
  /** The call's options, but the abort signal (each attempt has its own). */
  readonly options: Omit<LanguageModelV4CallOptions, 'abortSignal'>;
  readonly stream: boolean;
  /** The run's signal. */
  readonly signal: AbortSignal;
  readonly onDelta: ((delta: ModelDelta) => void) | undefined;
  readonly clock: Clock;
  readonly timeoutMs: number;
  readonly streamIdleTimeoutMs: number;
}

/** How one attempt ended. */
export type AttemptOutcome =
  | { readonly ok: true; readonly answer: AssembledAnswer; readonly timeToFirstTokenMs: number | undefined }
  | {
      readonly ok: false;
      readonly failure: AttemptFailure;
      /** The provider had answered (its stream opened): a cut is not "cannot reach". */
      readonly answering: boolean;
      /** Deltas already handed to `onDelta`: after one, the call is never retried. */
      readonly delivered: number;
    };

const ABORTED: unique symbol = Symbol('attempt aborted');

/** Thrown inside the read loop when the stream carried an `error` part. */
class StreamPartError {
  constructor(readonly failure: AttemptFailure) {}
}

/**
 * One call of the provider's model, streamed (`doStream`) or not
 * (`doGenerate`). Every phase ends promptly on an abort — of the run
 * (`cancel`), of the attempt's timeout (until the stream opens; the whole
 * answer when not streaming), or of the stream's idle watch (reset by parts
 * other than keep-alive pings) — because the attempt races the provider
 * against its own controller, whose abort also reaches the provider's
 * `fetch`, and cancels the stream's reader (which closes the response body).
 */
export async function runAttempt(input: AttemptInput): Promise<AttemptOutcome> {
  const { clock, signal } = input;
  const controller = new AbortController();
  let cause: AbortCause | undefined;
  let reader: ReadableStreamDefaultReader<LanguageModelV4StreamPart> | undefined;
  const abort = (why: AbortCause): void => {
    if (cause !== undefined) return;
    cause = why;
    controller.abort();
    // The provider's stream may not watch the signal once it is open: cancelling the reader ends the body.
    reader?.cancel().catch(() => {});
  };
  const onRunAbort = (): void => abort('cancel');
  signal.addEventListener('abort', onRunAbort, { once: true });
  if (signal.aborted) abort('cancel');
  let rejectAborted: (reason: unknown) => void = () => {};
  const aborted = new Promise<never>((_, reject) => {
    rejectAborted = reject;
  });
  const onOwnAbort = (): void => rejectAborted(ABORTED);
  if (controller.signal.aborted) onOwnAbort();
  else controller.signal.addEventListener('abort', onOwnAbort, { once: true });

  const startedAt = clock.now();
  let timeoutTimer: TimerHandle | undefined = clock.setTimeout(() => abort('timeout'), input.timeoutMs);
  let idleTimer: TimerHandle | undefined;
  let lastPartAt = startedAt;
  let firstDeltaAt: number | undefined;
  let answering = false;
  const acc = new PartAccumulator(input.stream ? input.onDelta : undefined);
  const options: LanguageModelV4CallOptions = { ...input.options, abortSignal: controller.signal };

  // Re-arms itself for the time left rather than being reset per part: a part costs one `now()`.
  const watchIdle = (): void => {
    const idle = clock.now() - lastPartAt;
    if (idle >= input.streamIdleTimeoutMs) abort('idle');
    else idleTimer = clock.setTimeout(watchIdle, input.streamIdleTimeoutMs - idle);
  };

  const work = async (): Promise<void> => {
    if (!input.stream) {
      const result = await input.model.doGenerate(options);
      answering = true;
      acc.pushContent(result.content, result.finishReason, result.usage, result.response?.modelId);
      return;
    }
    const { stream } = await input.model.doStream(options);
    answering = true;
    if (timeoutTimer !== undefined) clock.clearTimeout(timeoutTimer);
    timeoutTimer = undefined;
    const own = stream.getReader();
    reader = own;
    if (cause !== undefined) {
      own.cancel().catch(() => {});
      throw ABORTED;
    }
    lastPartAt = clock.now();
    idleTimer = clock.setTimeout(watchIdle, input.streamIdleTimeoutMs);
    try {
      for (;;) {
        const { done, value } = await own.read();
        if (done) break;
        if (value.type !== 'ping' && value.type !== 'raw') lastPartAt = clock.now();
        if (acc.push(value) > 0) firstDeltaAt ??= lastPartAt;
        const failed = acc.error;
        if (failed !== undefined) throw new StreamPartError(streamFailure(failed.error));
      }
    } finally {
      if (cause !== undefined || acc.error !== undefined) own.cancel().catch(() => {});
      own.releaseLock();
    }
    // A provider that ends its stream quietly when its signal aborts: the abort is ours to report.
    if (cause !== undefined) throw ABORTED;
  };

  const running = work();
  try {
    await Promise.race([running, aborted]);
    const answer = acc.finish();
    if (!acc.finished || answer.finishReason === 'interrupted') {
      return {
        ok: false,
        failure: {
          kind: 'connection',
          detail: 'the stream ended before the answer finished',
          url: undefined,
          cause: undefined,
        },
        answering: true,
        delivered: acc.deltaCount,
      };
    }
    if (answer.finishReason === 'error') {
      return {
        ok: false,
        failure: {
          kind: 'stream',
          detail: 'the provider ended the answer with finish reason "error"',
          serverCode: undefined,
          cause: undefined,
        },
        answering: true,
        delivered: acc.deltaCount,
      };
    }
    return {
      ok: true,
      answer,
      timeToFirstTokenMs: firstDeltaAt === undefined ? undefined : firstDeltaAt - startedAt,
    };
  } catch (error) {
    return {
      ok: false,
      failure:
        error instanceof StreamPartError && cause === undefined
          ? error.failure
          : classifyFailure(error === ABORTED ? undefined : error, cause),
      answering,
      delivered: acc.deltaCount,
    };
  } finally {
    // Whoever lost the race must not leave a rejection unhandled, nor a body open.
    running.catch(() => {});
    aborted.catch(() => {});
    if (!controller.signal.aborted) controller.abort();
    signal.removeEventListener('abort', onRunAbort);
    controller.signal.removeEventListener('abort', onOwnAbort);
    if (timeoutTimer !== undefined) clock.clearTimeout(timeoutTimer);
    if (idleTimer !== undefined) clock.clearTimeout(idleTimer);
  }
}
