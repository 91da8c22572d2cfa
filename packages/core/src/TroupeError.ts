/**
 * The error base of Troupe. Every error the library raises on purpose is a
 * `TroupeError` with a stable `code`; subclasses exist only where a caller
 * reacts differently (bad input, timeout, cancellation, closed, crashed,
 * backpressure).
 *
 * Errors cross threads as an {@link ErrorShape} and are rebuilt as the same
 * class on the other side (see `encodeError` / `decodeError`), so recognise
 * them with `isTroupeError(err, code?)` or `err.code`, not `instanceof` alone.
 *
 * @example
 * ```ts
 * try { await supervisor.answer(id, answer) }
 * catch (err) { if (isTroupeError(err, 'ERR_REQUEST_ALREADY_ANSWERED')) { ... } }
 * ```
 */

const BRAND = Symbol.for('troupe.error');

/**
 * Stable error codes. A code never changes meaning once published.
 *
 * Branch on codes, not on messages or classes: codes survive thread hops and
 * never change meaning.
 *
 * @example
 * ```ts
 * const retryLater = (err: unknown) => (['ERR_BACKPRESSURE', 'ERR_MODEL_RATE_LIMITED'] satisfies ErrorCode[]).some((code) => isTroupeError(err, code))
 * ```
 */
export type ErrorCode =
  | 'ERR_INVALID_ARGUMENT'
  | 'ERR_NOT_CLONEABLE'
  | 'ERR_SCOPE_OVER_BUDGET'
  | 'ERR_PROTECTED_KEY'
  | 'ERR_CONTEXT_UPDATE'
  | 'ERR_TOOL_FAILED'
  | 'ERR_TOOL_VALIDATION'
  | 'ERR_TOOL_TIMEOUT'
  | 'ERR_TOOL_UNKNOWN'
  | 'ERR_APPROVAL_DENIED'
  | 'ERR_CANCELLED'
  | 'ERR_CLOSED'
  | 'ERR_WORKER_CRASHED'
  | 'ERR_BACKPRESSURE'
  | 'ERR_PROTOCOL'
  | 'ERR_MODEL'
  | 'ERR_UNKNOWN_AGENT'
  | 'ERR_TABLE_FULL'
  | 'ERR_UNKNOWN_REQUEST'
  | 'ERR_REQUEST_ALREADY_ANSWERED'
  | 'ERR_REQUEST_EXPIRED'
  | 'ERR_REQUEST_DECLINED'
  | 'ERR_AGENT_STOPPED'
  /**
   * A message was sent to a parent agent that waits on a person (a question or
   * an approval): answer or cancel the request first, or send with `{ whileSuspended: 'queue' }`.
   */
  | 'ERR_AGENT_SUSPENDED'
  /**
   * A conversation restored with a `toolContext` holding none of the keys it
   * was started with (forgotten, or misspelt; its tools read them): pass it
   * again, as the scope.
   */
  | 'ERR_TOOL_CONTEXT_MISSING'
  /** An agent id is held here by another conversation (ids are unique per supervisor, across tenants). */
  | 'ERR_AGENT_ID_IN_USE'
  | 'ERR_INTERNAL'
  /** A host-channel call was refused: unknown operation, bad arguments, or not this thread's run. */
  | 'ERR_HOST_REFUSED'
  /** The model server refused the credentials (401, 403). */
  | 'ERR_MODEL_AUTH'
  /** The model server refused the request itself (400, 404, 422...): not retried. */
  | 'ERR_MODEL_BAD_REQUEST'
  /** Rate limited (429) past the retry budget, or told to wait longer than the cap. */
  | 'ERR_MODEL_RATE_LIMITED'
  /** The model call overran its timeout. */
  | 'ERR_MODEL_TIMEOUT'
  /**
   * An agent's model factory threw, rejected or returned something that is not
   * a model (the message names the agent): fix what it reads; the next run calls it again.
   */
  | 'ERR_MODEL_FACTORY'
  /** The model server could not be reached (refused, reset, DNS). */
  | 'ERR_MODEL_CONNECTION'
  /** A streamed answer stalled: no delta within the idle timeout. */
  | 'ERR_MODEL_STREAM_IDLE'
  /** An MCP server could not be started or reached, or went away during a call (`@troupe/mcp`). */
  | 'ERR_MCP_CONNECTION'
  /** An MCP server refused a request with a protocol error (unknown tool, invalid arguments, its own failure). */
  | 'ERR_MCP_REQUEST'
  /** A value cannot be saved as JSON (metadata, answers): refused when it is made. */
  | 'ERR_NOT_JSON'
  /** The store's file is not a Troupe database, or is damaged. */
  | 'ERR_STORE_CORRUPT'
  /** The store was written by a newer Troupe (its schema version is unknown here). */
  | 'ERR_STORE_VERSION'
  /** Another connection held the store's file for writing past the busy timeout. */
  | 'ERR_STORE_LOCKED'
  /**
   * Another process (or another copy of the agent) saved this conversation or
   * run after this one loaded it: nothing of the write was saved. Load the
   * conversation again (`startAgent`) to go on from what is saved.
   */
  | 'ERR_STORE_FENCED'
  /**
   * Another live process is running a message of this conversation (its run
   * is `running` in the store, and its process is alive): start the agent
   * there, or here once that message has ended.
   */
  | 'ERR_CONVERSATION_BUSY'
  /** A write to the store failed (read-only file, full disk): nothing was advanced past it. */
  | 'ERR_STORE_WRITE'
  /** The store's server could not be reached, refused the login, or went away mid-call (a database server's store). */
  | 'ERR_STORE_UNREACHABLE'
  /** A tool's side effect started but its result was never saved (the process died): not re-run. */
  | 'ERR_INTERRUPTED'
  /** A subagent reached its turn limit without an answer. */
  | 'ERR_INCOMPLETE'
  /** The final answer did not match the agent's `output` schema, after its retries (the message names the path). */
  | 'ERR_OUTPUT_INVALID'
  /** This Node.js is outside the supported range (thrown when `@troupe/core` is imported). */
  | 'ERR_UNSUPPORTED_NODE'
  /** Redis could not be reached when a transport or a worker host started (`@troupe/bullmq`): nothing was started. */
  | 'ERR_REDIS_UNREACHABLE'
  /** Redis is set up in a way that loses work (an eviction policy other than `noeviction`): refused at start. */
  | 'ERR_REDIS_CONFIG'
  /** Two hosts of a cluster run different builds (or protocol versions): the work was refused, nothing ran. */
  | 'ERR_VERSION_SKEW'
  /** The host that ran an attempt vanished (killed, lease lapsed, lock lost): the attempt may run again. */
  | 'ERR_ATTEMPT_LOST';

/**
 * Options accepted by every Troupe error constructor.
 *
 * @example
 * ```ts
 * const options: TroupeErrorOptions = { code: 'ERR_INVALID_ARGUMENT', cause: new RangeError('too big') }
 * const err = new TroupeError('limit must be at most 100', options)
 * ```
 */
export interface TroupeErrorOptions {
  readonly code?: ErrorCode;
  readonly cause?: unknown;
}

/**
 * The base of every error Troupe raises on purpose.
 *
 * Throw it (or a subclass) from your own code when a caller should branch on a
 * `code`; anything else thrown by a tool is reported as `ERR_TOOL_FAILED`.
 *
 * @example
 * ```ts
 * const err = new TroupeError('the ledger is read-only: retry after the close', { code: 'ERR_TOOL_FAILED' })
 * isTroupeError(err, 'ERR_TOOL_FAILED') // true
 * ```
 */
export class TroupeError extends Error {
  /** Stable machine-readable code; see {@link ErrorCode}. */
  readonly code: ErrorCode;
  override readonly name: string = 'TroupeError';

  constructor(message: string, options: TroupeErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = options.code ?? 'ERR_INTERNAL';
    Object.defineProperty(this, BRAND, { value: true });
  }

  /** Class-specific fields that must survive a thread hop. */
  toData(): Record<string, unknown> | undefined {
    return undefined;
  }
}

/**
 * The caller passed something wrong; the message says what to change.
 *
 * @example
 * ```ts
 * const parsePort = (value: string): number => {
 *   const port = Number(value)
 *   if (!Number.isInteger(port)) throw new InvalidArgumentError(`port must be an integer, got ${value}`)
 *   return port
 * }
 * ```
 */
export class InvalidArgumentError extends TroupeError {
  override readonly name: string = 'InvalidArgumentError';
  constructor(message: string, options: TroupeErrorOptions = {}) {
    super(message, { ...options, code: options.code ?? 'ERR_INVALID_ARGUMENT' });
  }
}

/**
 * Why a run or a call was cancelled.
 *
 * `user`: the host cancelled; `parent`: the parent's run ended or was
 * cancelled; `deadline`: a timeout; `shutdown`: the supervisor is closing.
 *
 * @example
 * ```ts
 * const reason: CancelReason = 'user'
 * supervisor.cancel('agent_1', reason)
 * ```
 */
export type CancelReason = 'user' | 'parent' | 'deadline' | 'shutdown';

/**
 * A run or a tool call was cancelled; `reason` says by whom. An interruption, not a failure.
 *
 * Tools meet it through `ctx.throwIfCancelled()` and `ctx.signal`: let it
 * propagate rather than catch it.
 *
 * It carries no stack frames (`stack` is its name and message): a cancel is
 * control flow, its reason says why, and the frames would only name
 * Troupe's executor. A cancelled tree makes one per cancelled call and run,
 * on threads that wake all at once; capturing and then formatting a stack
 * for each (its `stack` is read when it crosses a thread) was most of what
 * a worker did to end a cancelled run.
 *
 * @example
 * ```ts
 * const err = new CancelledError('deadline')
 * err.code   // 'ERR_CANCELLED'
 * err.reason // 'deadline'
 * ```
 */
export class CancelledError extends TroupeError {
  override readonly name: string = 'CancelledError';
  readonly reason: CancelReason;
  constructor(reason: CancelReason, message?: string, options: TroupeErrorOptions = {}) {
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    try {
      super(message ?? `cancelled (${reason})`, { ...options, code: 'ERR_CANCELLED' });
    } finally {
      Error.stackTraceLimit = limit;
    }
    this.reason = reason;
  }
  override toData(): Record<string, unknown> {
    return { reason: this.reason };
  }
}

/**
 * A tool overran its `timeoutMs`. Terminal: the tool may have half-done its side
 * effects, so it is never re-run. `forced` is true when the worker running it
 * had to be killed because the code never yielded.
 *
 * @example
 * ```ts
 * const err = new ToolTimeoutError('fetch_page', 30_000)
 * err.message // 'tool "fetch_page" timed out after 30000 ms; a timed-out tool is never retried'
 * ```
 */
export class ToolTimeoutError extends TroupeError {
  override readonly name: string = 'ToolTimeoutError';
  readonly toolName: string;
  readonly timeoutMs: number;
  readonly forced: boolean;
  constructor(toolName: string, timeoutMs: number, forced = false, options: TroupeErrorOptions = {}) {
    super(
      `tool "${toolName}" timed out after ${timeoutMs} ms${forced ? ' and never yielded: its worker was killed' : ''}; a timed-out tool is never retried`,
      { ...options, code: 'ERR_TOOL_TIMEOUT' },
    );
    this.toolName = toolName;
    this.timeoutMs = timeoutMs;
    this.forced = forced;
  }
  override toData(): Record<string, unknown> {
    return { toolName: this.toolName, timeoutMs: this.timeoutMs, forced: this.forced };
  }
}

/**
 * The object was closed; create a new one.
 *
 * @example
 * ```ts
 * try {
 *   await supervisor.ready()
 * } catch (err) {
 *   if (isTroupeError(err, 'ERR_CLOSED')) console.log('the supervisor was closed; create a new one')
 * }
 * ```
 */
export class ClosedError extends TroupeError {
  override readonly name: string = 'ClosedError';
  constructor(message: string, options: TroupeErrorOptions = {}) {
    super(message, { ...options, code: 'ERR_CLOSED' });
  }
}

/**
 * A worker thread died (threw at top level, `process.exit`, out of memory). A defect.
 *
 * A defect, not a failure: the run ends `crashed`; its worker is replaced.
 *
 * @example
 * ```ts
 * const outcome = await supervisor.spawn(agent, { input: 'Summarise', scope: {} })
 * if (outcome.status === 'crashed') console.error(outcome.error)
 * ```
 */
export class WorkerCrashedError extends TroupeError {
  override readonly name: string = 'WorkerCrashedError';
  readonly exitCode: number | null;
  constructor(message: string, exitCode: number | null, options: TroupeErrorOptions = {}) {
    super(message, { ...options, code: 'ERR_WORKER_CRASHED' });
    this.exitCode = exitCode;
  }
  override toData(): Record<string, unknown> {
    return { exitCode: this.exitCode };
  }
}

/**
 * A bounded queue or mailbox is full; retry later or raise the bound.
 *
 * Thrown by `send` on a full mailbox and by `spawn` on a full pool queue.
 *
 * @example
 * ```ts
 * declare const handle: { send(message: string): Promise<unknown> }
 * try {
 *   await handle.send('hello')
 * } catch (err) {
 *   if (isTroupeError(err, 'ERR_BACKPRESSURE')) console.warn(`busy (limit ${(err as BackpressureError).limit}); try again later`)
 *   else throw err
 * }
 * ```
 */
export class BackpressureError extends TroupeError {
  override readonly name: string = 'BackpressureError';
  readonly limit: number;
  constructor(message: string, limit: number, options: TroupeErrorOptions = {}) {
    super(message, { ...options, code: 'ERR_BACKPRESSURE' });
    this.limit = limit;
  }
  override toData(): Record<string, unknown> {
    return { limit: this.limit };
  }
}

/**
 * True when `value` is a Troupe error (by brand, so it also holds for errors
 * rebuilt after a thread hop), optionally with the given `code`.
 *
 * Prefer it to `instanceof`: an error rebuilt after a thread hop, or from a
 * second copy of the package, is still recognised.
 *
 * @example
 * ```ts
 * try {
 *   sealScope({ save() {} })
 * } catch (err) {
 *   if (isTroupeError(err, 'ERR_NOT_CLONEABLE')) console.log(err.message) // names the path
 * }
 * ```
 */
export function isTroupeError(value: unknown, code?: ErrorCode): value is TroupeError {
  if (typeof value !== 'object' || value === null) return false;
  if ((value as { [BRAND]?: unknown })[BRAND] !== true) return false;
  return code === undefined || (value as TroupeError).code === code;
}
