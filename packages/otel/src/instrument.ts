import { type Tracer, trace } from '@opentelemetry/api';
import { InvalidArgumentError, type Scope } from '@troupe/core';
import { describeValue } from '@troupe/core/internal';
import type { Supervisor } from '@troupe/supervisor';
import { Bridge } from './internal/Bridge.js';

/**
 * The name of the tracer `instrument` uses when it is given none.
 *
 * @example
 * ```ts
 * import { trace } from '@opentelemetry/api'
 *
 * using tracing = instrument(supervisor, { tracer: trace.getTracer(TRACER_NAME, '1.0.0') })
 * ```
 */
export const TRACER_NAME = '@troupe/otel';

/**
 * Options of {@link instrument}.
 *
 * @example
 * ```ts
 * import { createHash } from 'node:crypto'
 *
 * const options: InstrumentOptions = {
 *   tenant: (scope) => createHash('sha256').update(String((scope as { tenantId: string }).tenantId)).digest('hex').slice(0, 16),
 *   captureContent: { maxLength: 256 },
 *   onError: (error) => console.error('tracing:', error),
 * }
 * using tracing = instrument(supervisor, options)
 * ```
 */
export interface InstrumentOptions {
  /** Where spans go (default: `trace.getTracer('@troupe/otel')` of the global provider). */
  readonly tracer?: Tracer;
  /**
   * The only way a tenant reaches a span: called with a run's scope when
   * its tree starts, its result recorded as `troupe.tenant` on every span of
   * the tree. Return something that is safe to export (a hash, an opaque
   * id). Without it, nothing of the scope is recorded. A hook that throws or
   * returns a non-string records nothing.
   */
  readonly tenant?: (scope: Scope) => string;
  /**
   * Record content: model answers (`gen_ai.output.messages`) and tool-call
   * arguments (`gen_ai.tool.call.arguments`), as the model streamed them,
   * each cut to `maxLength` characters (default 1024). Off unless given.
   * Bounded whatever a model streams: of one model call, at most 128 tool
   * calls are captured, and every string kept (ids included) is cut.
   * Turning it on makes workers stream their models' deltas to the
   * supervisor. Reasoning text, scope and toolContext are never recorded.
   */
  readonly captureContent?: { readonly maxLength?: number };
  /** Told of every error the tracer (or an exporter behind it) threw into the bridge; the run is never affected. */
  readonly onError?: (error: unknown) => void;
}

/**
 * A running bridge between a supervisor and a tracer.
 *
 * @example
 * ```ts
 * using tracing = instrument(supervisor)
 * const handle = await supervisor.startAgent(agent, { scope: {} })
 * await handle.send('hello')
 * console.log(tracing.stats()) // { spans: 4, open: 0, errors: 0 }
 * ```
 */
export interface Instrumentation {
  /** Stop tracing: every listener is removed (nothing of the bridge is left on the supervisor); open spans end now. Idempotent. */
  stop(): void;
  /** Spans started so far, spans open now, errors the tracer threw into the bridge (caught). */
  stats(): { readonly spans: number; readonly open: number; readonly errors: number };
  /** `using tracing = instrument(...)` stops it. */
  [Symbol.dispose](): void;
}

const DEFAULT_MAX_CONTENT = 1024;

/**
 * Trace a supervisor: its events become OpenTelemetry spans, made on the
 * supervisor thread with the times the workers measured — no tracing SDK
 * runs in a worker. One `invoke_agent {agent}` span per parent message and
 * per subagent run (a child under the `execute_tool task` call that spawned
 * it), `execute_tool {tool}` per tool call, `chat {model}` per model call,
 * named and attributed by the GenAI semantic conventions
 * ({@link CONVENTIONS_VERSION}).
 *
 * A span active when the host calls `send`, `spawn` or `answer` parents the
 * tree (with an `AsyncLocalStorage`-based context manager, the Node SDK's
 * default). A suspension ends its span marked `suspended`, not failed; the
 * resumed run's span links to it. Runs already running when `instrument` is
 * called are not traced.
 *
 * Gotchas: give the tracer provider a batching span processor — a
 * processor that exports synchronously on span end runs on the supervisor
 * thread. A tracer that throws never reaches a run: its errors are counted
 * in `stats().errors` and passed to `onError`.
 *
 * @example
 * ```ts
 * import { trace } from '@opentelemetry/api'
 * import { instrument } from '@troupe/otel'
 * import { createSupervisor } from '@troupe/supervisor'
 * import { createHash } from 'node:crypto'
 *
 * const supervisor = createSupervisor()
 * const tracing = instrument(supervisor, {
 *   tracer: trace.getTracer('my-daemon'),
 *   tenant: (scope) => createHash('sha256').update(String((scope as { orgId: string }).orgId)).digest('hex').slice(0, 16),
 * })
 * // ... later
 * tracing.stop()
 * ```
 */
export function instrument(supervisor: Supervisor, options: InstrumentOptions = {}): Instrumentation {
  if (
    typeof supervisor !== 'object' ||
    supervisor === null ||
    typeof (supervisor as { on?: unknown }).on !== 'function' ||
    typeof (supervisor as { scopeOf?: unknown }).scopeOf !== 'function'
  ) {
    throw new InvalidArgumentError('instrument(supervisor): pass a supervisor made with createSupervisor');
  }
  if (typeof options !== 'object' || options === null) {
    throw new InvalidArgumentError('instrument(supervisor, options): options must be an object');
  }
  const tracer = options.tracer ?? trace.getTracer(TRACER_NAME);
  if (typeof tracer?.startSpan !== 'function') {
    throw new InvalidArgumentError('options.tracer must be an OpenTelemetry Tracer (trace.getTracer(name))');
  }
  if (options.tenant !== undefined && typeof options.tenant !== 'function') {
    throw new InvalidArgumentError('options.tenant must be a function (scope) => string, e.g. a hash of its tenant id');
  }
  if (options.onError !== undefined && typeof options.onError !== 'function') {
    throw new InvalidArgumentError('options.onError must be a function (error) => void');
  }
  let maxContentLength: number | undefined;
  if (options.captureContent !== undefined) {
    if (typeof options.captureContent !== 'object' || options.captureContent === null) {
      throw new InvalidArgumentError('options.captureContent must be an object { maxLength?: number }');
    }
    maxContentLength = options.captureContent.maxLength ?? DEFAULT_MAX_CONTENT;
    if (!Number.isSafeInteger(maxContentLength) || maxContentLength < 1) {
      throw new InvalidArgumentError(
        `options.captureContent.maxLength must be a positive integer (characters kept per value), got ${describeValue(maxContentLength)}`,
      );
    }
  }
  const bridge = new Bridge(supervisor, {
    tracer,
    tenant: options.tenant,
    maxContentLength,
    onError: options.onError,
  });
  return {
    stop: () => bridge.stop(),
    stats: () => bridge.stats(),
    [Symbol.dispose]: () => bridge.stop(),
  };
}
