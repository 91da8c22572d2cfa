import type { Clock, ModelDelta, TimerHandle } from '@troupe/core';
import type OpenAI from 'openai';
import type { ChatCompletionCreateParamsBase } from 'openai/resources/chat/completions';
import { ChatStreamAccumulator, type NormalisedAnswer } from '../ChatStreamAccumulator.js';
import { type AbortCause, type AttemptFailure, classifyFailure } from './AttemptFailure.js';

/** What one attempt needs. */
export interface AttemptInput {
  readonly client: OpenAI;
  readonly body: Omit<ChatCompletionCreateParamsBase, 'stream' | 'stream_options'>;
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
  | {
      readonly ok: true;
      readonly answer: NormalisedAnswer;
      /** When (on the clock) the first delta was parsed, if one was: the call measures its time to first token from it. */
      readonly firstDeltaAt: number | undefined;
    }
  | {
      readonly ok: false;
      readonly failure: AttemptFailure;
      /** The server had answered (headers came): a cut is not "cannot reach". */
      readonly answering: boolean;
      /** Deltas already handed to `onDelta` (or assembled): after one, the call is never retried. */
      readonly delivered: number;
    };

// The SDK's own timeout is set past ours so that ours always fires first (and is the one reported).
const SDK_TIMEOUT_MS = 2_147_483_647;
const ABORTED: unique symbol = Symbol('attempt aborted');

/**
 * One HTTP request for a model call, streamed or not. Every phase ends
 * promptly on an abort — of the run (`cancel`), of the attempt's timeout
 * (connect and headers; the whole body when not streaming), or of the
 * stream's idle watch (reset by parsed deltas only: keep-alive comments are
 * not parsed chunks) — because the attempt races the SDK against its own
 * controller, whose abort also reaches `fetch` and closes the socket.
 */
export async function runAttempt(input: AttemptInput): Promise<AttemptOutcome> {
  const { clock, signal } = input;
  const controller = new AbortController();
  let cause: AbortCause | undefined;
  const abort = (why: AbortCause): void => {
    if (cause !== undefined) return;
    cause = why;
    controller.abort();
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
  let lastDeltaAt = startedAt;
  let firstDeltaAt: number | undefined;
  let answering = false;
  const acc = new ChatStreamAccumulator({ onDelta: input.onDelta });
  const options = { signal: controller.signal, maxRetries: 0, timeout: SDK_TIMEOUT_MS };

  // Re-arms itself for the time left rather than being reset per delta: a delta costs one `now()`.
  const watchIdle = (): void => {
    const idle = clock.now() - lastDeltaAt;
    if (idle >= input.streamIdleTimeoutMs) abort('idle');
    else idleTimer = clock.setTimeout(watchIdle, input.streamIdleTimeoutMs - idle);
  };

  const work = async (): Promise<void> => {
    if (!input.stream) {
      const completion = await input.client.chat.completions.create({ ...input.body, stream: false }, options);
      answering = true;
      acc.push(completion);
      return;
    }
    const { data: stream, response } = await input.client.chat.completions
      .create({ ...input.body, stream: true, stream_options: { include_usage: true } }, options)
      .withResponse();
    answering = true;
    // Labelled JSON: a server that ignores `stream: true` and answers with one completion, or a
    // gateway mislabelling a stream. The stream is read as ever; if it held no event, the copy is
    // read as one completion.
    const copy = /^application\/json\b/i.test(response.headers.get('content-type') ?? '')
      ? response.clone()
      : undefined;
    clock.clearTimeout(timeoutTimer);
    timeoutTimer = undefined;
    lastDeltaAt = clock.now();
    idleTimer = clock.setTimeout(watchIdle, input.streamIdleTimeoutMs);
    let chunks = 0;
    try {
      for await (const chunk of stream) {
        chunks++;
        if (acc.push(chunk) > 0) {
          lastDeltaAt = clock.now();
          firstDeltaAt ??= lastDeltaAt;
        }
      }
    } catch (error) {
      if (copy === undefined || chunks > 0 || cause !== undefined) throw error;
    }
    if (copy !== undefined) {
      if (chunks === 0 && cause === undefined) acc.push((await copy.json()) as never);
      else void copy.body?.cancel().catch(() => {});
    }
    // The SDK ends its iteration quietly when its signal aborts: the abort is ours to report.
    if (cause !== undefined) throw ABORTED;
  };

  const running = work();
  try {
    await Promise.race([running, aborted]);
    const answer = acc.finish();
    if (input.stream && answer.finishReason === undefined) {
      return {
        ok: false,
        failure: { kind: 'connection', detail: 'the stream ended before the answer finished', cause: undefined },
        answering: true,
        delivered: acc.deltaCount,
      };
    }
    return { ok: true, answer, firstDeltaAt };
  } catch (error) {
    return {
      ok: false,
      failure: classifyFailure(error === ABORTED ? undefined : error, cause, input.stream),
      answering,
      delivered: acc.deltaCount,
    };
  } finally {
    // Whoever lost the race must not leave a rejection unhandled, nor a socket open.
    running.catch(() => {});
    aborted.catch(() => {});
    if (!controller.signal.aborted) controller.abort();
    signal.removeEventListener('abort', onRunAbort);
    controller.signal.removeEventListener('abort', onOwnAbort);
    if (timeoutTimer !== undefined) clock.clearTimeout(timeoutTimer);
    if (idleTimer !== undefined) clock.clearTimeout(idleTimer);
  }
}
