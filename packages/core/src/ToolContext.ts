import type { CancelToken, RunCancellation } from './CancelToken.js';
import type { Metadata } from './ContextUpdate.js';
import type { AgentId, ToolCallId } from './Id.js';
import { describeValue } from './internal/describeValue.js';
import type { Message, Todo } from './Model.js';
import type { Answer } from './Request.js';
import type { Scope } from './Scope.js';
import { type CancelReason, InvalidArgumentError } from './TroupeError.js';

/**
 * A read-only view of the calling agent's state.
 *
 * Read it as `ctx.state`; write metadata by returning a {@link ContextUpdate}.
 *
 * @example
 * ```ts
 * const countNotes = defineTool({
 *   name: 'count_notes',
 *   description: 'How many notes are kept',
 *   parameters: z.object({}),
 *   execute: (_args, ctx) => {
 *     const state: AgentStateView = ctx.state
 *     return Array.isArray(state.metadata.notes) ? state.metadata.notes.length : 0
 *   },
 * })
 * ```
 */
export interface AgentStateView {
  readonly agentId: AgentId;
  readonly messages: readonly Message[];
  readonly todos: readonly Todo[];
  /** Changed only through `ContextUpdate`s returned by tools. */
  readonly metadata: Metadata;
}

/**
 * The keys Troupe owns in a tool's context; a `toolContext` key of the same name is overridden.
 *
 * @example
 * ```ts
 * const toolContext = { requestId: 'r1', signal: 'mine' }
 * const overridden = Object.keys(toolContext).filter((k) => (RESERVED_CONTEXT_KEYS as readonly string[]).includes(k)) // ['signal']
 * ```
 */
export const RESERVED_CONTEXT_KEYS = [
  'scope',
  'state',
  'toolContext',
  'agentId',
  'parentAgentId',
  'toolCallId',
  'toolName',
  'attempt',
  'deadline',
  'timeoutMs',
  'answer',
  'signal',
  'isCancelled',
  'throwIfCancelled',
  'cancel',
] as const;

/**
 * What Troupe puts in every tool's context. `S` is the scope the tool reads
 * (what the supervisor's scope schema produces), `TC` the shape of the
 * caller's `toolContext`; see {@link ToolContext}.
 *
 * @example
 * ```ts
 * const slowSearch = defineTool({
 *   name: 'slow_search',
 *   description: 'Search page by page',
 *   parameters: z.object({ pages: z.number().int() }),
 *   execute: async ({ pages }, ctx: ToolContext) => {
 *     const found: unknown[] = []
 *     for (let page = 1; page <= pages; page++) {
 *       ctx.throwIfCancelled()
 *       found.push(await (await fetch(`https://search.example/?page=${page}`, { signal: ctx.signal })).json())
 *     }
 *     return { found, attempt: ctx.attempt }
 *   },
 * })
 * ```
 */
export interface ReservedToolContext<S = unknown, TC extends object = Record<never, never>> {
  /** Who the agent acts for: the parsed, frozen scope. */
  readonly scope: Scope<S>;
  /** The caller's static toolContext, whole (its keys are also merged flat). */
  readonly toolContext: Readonly<TC>;
  readonly state: AgentStateView;
  /** This agent's id (a subagent's is `<parentId>-sub-<n>`). */
  readonly agentId: AgentId;
  /** The parent's id, or `undefined` for a top-level agent. */
  readonly parentAgentId: AgentId | undefined;
  readonly toolCallId: ToolCallId;
  readonly toolName: string;
  /** 1 on the first attempt, 2 on the first retry, ... */
  readonly attempt: number;
  /** Absolute deadline of this call in the `Clock` base, if any. */
  readonly deadline: number | undefined;
  /** Milliseconds this call had left when it started, if it has a deadline. */
  readonly timeoutMs: number | undefined;
  /** The host's answer, only on a call resumed after `ToolResult.pending`. */
  readonly answer: Answer | undefined;
  /** Aborts (with a `CancelledError`) when the call or its run is cancelled. */
  readonly signal: AbortSignal;
  /** One atomic load: safe in a tight loop. */
  isCancelled(): boolean;
  /** Throws a `CancelledError` carrying the reason when cancelled. */
  throwIfCancelled(): void;
  /**
   * Cancel the run this tool is part of, and everything under it (its
   * subagents), from inside the tool: `isCancelled()` is true at once, the
   * run ends `cancelled` with `reason` (default `'user'`). Return promptly
   * after it; what the tool returns is not used. Throws an
   * `InvalidArgumentError` for a reason that is not a `CancelReason`.
   */
  cancel(reason?: CancelReason): void;
}

/**
 * What a tool's `execute` receives: the caller's `toolContext` keys merged
 * flat, overridden by the {@link ReservedToolContext} keys.
 *
 * Both parameters are what the tool declares it reads: `S`, the scope
 * (`ctx.scope` is a deep-readonly `S`), and `TC`, the `toolContext` keys (read
 * flat, `ctx.requestId`, or whole, `ctx.toolContext`). Annotate `execute`'s
 * `ctx` with it and `defineTool`, then `defineAgent`, carry both: a supervisor
 * refuses at compile time to start the agent with a scope schema whose output
 * lacks what the tools read, or a `toolContext` of another shape. Undeclared:
 * `ctx.scope` is `unknown` and every flat key reads as `unknown`.
 *
 * Gotcha: these are compile-time promises. At run time the supervisor's scope
 * schema is what checks the scope; a supervisor without one passes whatever
 * plain data it is given.
 *
 * @example
 * ```ts
 * const OrderScope = defineScope(z.object({ tenantId: z.string(), userId: z.string() }))
 * type OrderContext = ToolContext<ScopeOf<typeof OrderScope>, { requestId: string }>
 * const whoAmI = defineTool({
 *   name: 'who_am_i',
 *   description: 'Say who the agent acts for',
 *   parameters: z.object({}),
 *   execute: (_args, ctx: OrderContext) => `${ctx.scope.tenantId}/${ctx.scope.userId} (${ctx.requestId})`,
 * })
 * ```
 */
export type ToolContext<S = unknown, TC extends object = Record<never, never>> = Omit<TC, keyof ReservedToolContext> &
  ReservedToolContext<S, TC>;

/**
 * The per-run part of a tool context: fixed for every call of a run.
 *
 * @example
 * ```ts
 * const run: RunContext = {
 *   scope: sealScope({ tenantId: 't1' }),
 *   toolContext: Object.freeze({ requestId: 'r1' }),
 *   agentId: createId('agent'),
 *   parentAgentId: undefined,
 * }
 * ```
 */
export interface RunContext {
  readonly scope: Scope;
  readonly toolContext: Readonly<Record<string, unknown>>;
  readonly agentId: AgentId;
  readonly parentAgentId: AgentId | undefined;
}

/**
 * The per-call part of a tool context.
 *
 * Built by the runtime for each call; you need one only to call
 * {@link buildToolContext} yourself (in a test).
 *
 * @example
 * ```ts
 * const call: CallContext = {
 *   state: { agentId: createId('agent'), messages: [], todos: [], metadata: {} },
 *   toolCallId: createId('call'),
 *   toolName: 'lookup',
 *   attempt: 1,
 *   deadline: undefined,
 *   timeoutMs: undefined,
 *   answer: undefined,
 *   token: neverCancelled,
 * }
 * ```
 */
export interface CallContext {
  readonly state: AgentStateView;
  readonly toolCallId: ToolCallId;
  readonly toolName: string;
  readonly attempt: number;
  readonly deadline: number | undefined;
  readonly timeoutMs: number | undefined;
  readonly answer: Answer | undefined;
  readonly token: CancelToken;
  /** The run the call belongs to, for `ctx.cancel()`; without it `ctx.cancel()` throws. */
  readonly cancellation?: Pick<RunCancellation, 'cancel'> | undefined;
}

const CANCEL_REASONS: ReadonlySet<unknown> = new Set(['user', 'parent', 'deadline', 'shutdown']);

function cancelFor(run: Pick<RunCancellation, 'cancel'> | undefined): (reason?: CancelReason) => void {
  return (reason: CancelReason = 'user') => {
    if (!CANCEL_REASONS.has(reason)) {
      throw new InvalidArgumentError(
        `ctx.cancel(reason): reason must be 'user', 'parent', 'deadline' or 'shutdown', got ${describeValue(reason)}`,
      );
    }
    if (run === undefined) {
      throw new InvalidArgumentError(
        'ctx.cancel(): this context belongs to no run (it was built without a cancellation)',
      );
    }
    run.cancel(reason);
  };
}

// The reserved keys as a set, to filter the flat toolContext keys once per run.
const RESERVED: ReadonlySet<string> = new Set(RESERVED_CONTEXT_KEYS);

const EMPTY_METADATA: Metadata = Object.freeze({});

/** A tool-context constructor for one `toolContext`: its flat keys live on the prototype. */
type ToolContextClass = new (run: RunContext, call: CallContext) => ToolContext<unknown, RunContext['toolContext']>;

// One class per frozen toolContext (in practice: per run, shared by its calls).
const classes = new WeakMap<object, ToolContextClass>();

/**
 * Make the class whose instances are the tool contexts of one `toolContext`.
 *
 * Why a class per toolContext: building the context is on every tool call's
 * path, and spreading the toolContext into a fresh literal (with a getter)
 * cost ~1 µs. Here the flat keys are defined once on the prototype, the
 * reserved keys are own properties assigned in a constructor with a stable
 * shape, and the token sits in a private field that only the `signal` getter
 * reads: ~40 ns. Reserved keys win because own properties shadow the
 * prototype, and a reserved name is never put on the prototype (a flat
 * `signal` would otherwise shadow the getter).
 */
function contextClass(toolContext: Readonly<Record<string, unknown>>): ToolContextClass {
  const ToolContextObject = class implements ReservedToolContext<unknown, RunContext['toolContext']> {
    readonly #token: CancelToken;
    readonly #run: Pick<RunCancellation, 'cancel'> | undefined;
    #cancel: ((reason?: CancelReason) => void) | undefined;
    declare readonly scope: Scope;
    declare readonly toolContext: Readonly<Record<string, unknown>>;
    declare readonly state: AgentStateView;
    declare readonly agentId: AgentId;
    declare readonly parentAgentId: AgentId | undefined;
    declare readonly toolCallId: ToolCallId;
    declare readonly toolName: string;
    declare readonly attempt: number;
    declare readonly deadline: number | undefined;
    declare readonly timeoutMs: number | undefined;
    declare readonly answer: Answer | undefined;
    // Own closures rather than prototype methods, so `const { isCancelled } = ctx` keeps working.
    declare readonly isCancelled: () => boolean;
    declare readonly throwIfCancelled: () => void;

    constructor(run: RunContext, call: CallContext) {
      const token = call.token;
      this.#token = token;
      this.scope = run.scope;
      this.toolContext = run.toolContext;
      this.state = call.state.metadata === undefined ? { ...call.state, metadata: EMPTY_METADATA } : call.state;
      this.agentId = run.agentId;
      this.parentAgentId = run.parentAgentId;
      this.toolCallId = call.toolCallId;
      this.toolName = call.toolName;
      this.attempt = call.attempt;
      this.deadline = call.deadline;
      this.timeoutMs = call.timeoutMs;
      this.answer = call.answer;
      this.isCancelled = () => token.isCancelled();
      this.throwIfCancelled = () => token.throwIfCancelled();
      this.#run = call.cancellation;
    }

    /** Made on first access (most tools never cancel their run); works detached, like isCancelled. */
    get cancel(): (reason?: CancelReason) => void {
      this.#cancel ??= cancelFor(this.#run);
      return this.#cancel;
    }

    /** Read from the token on access: a token creates its AbortController lazily. */
    get signal(): AbortSignal {
      return this.#token.signal;
    }
  };
  const proto = ToolContextObject.prototype as object;
  for (const key of Object.keys(toolContext)) {
    if (RESERVED.has(key)) continue;
    Object.defineProperty(proto, key, {
      value: toolContext[key],
      enumerable: true,
      writable: false,
      configurable: false,
    });
  }
  return ToolContextObject as unknown as ToolContextClass;
}

/**
 * Build the context a tool sees: the caller's
 * `toolContext` keys readable flat (`ctx.featureFlags`), the whole
 * `toolContext` under `ctx.toolContext`, `state` nested (its metadata under
 * `ctx.state.metadata`, never flat; `{}` when the state has none), and the
 * reserved keys ({@link RESERVED_CONTEXT_KEYS}), which always win on
 * collision.
 *
 * Gotchas: the flat keys are inherited from a per-toolContext prototype and
 * `signal` and `cancel` are getters there, so they are not own properties —
 * `Object.keys(ctx)`, `{ ...ctx }` and `JSON.stringify(ctx)` show only the
 * reserved keys. Forward `ctx.toolContext`, never a spread of `ctx`. A frozen
 * `toolContext` (the normal case) is read once and cached; an unfrozen one is
 * re-read on every call.
 *
 * @example
 * ```ts
 * const run: RunContext = {
 *   scope: sealScope({ tenantId: 't1' }),
 *   toolContext: Object.freeze({ featureFlags: { beta: true }, scope: 'ignored' }),
 *   agentId: createId('agent'),
 *   parentAgentId: undefined,
 * }
 * const call: CallContext = {
 *   state: { agentId: run.agentId, messages: [], todos: [], metadata: {} },
 *   toolCallId: createId('call'),
 *   toolName: 'lookup',
 *   attempt: 1,
 *   deadline: undefined,
 *   timeoutMs: undefined,
 *   answer: undefined,
 *   token: neverCancelled,
 * }
 * const ctx = buildToolContext(run, call)
 * ctx.featureFlags // { beta: true }, from run.toolContext
 * ctx.scope        // always run.scope, even though toolContext has a `scope` key
 * ```
 */
export function buildToolContext(run: RunContext, call: CallContext): ToolContext<unknown, RunContext['toolContext']> {
  const toolContext = run.toolContext;
  let Ctx = classes.get(toolContext);
  if (Ctx === undefined) {
    Ctx = contextClass(toolContext);
    // Only a frozen toolContext cannot change under the cached prototype.
    if (Object.isFrozen(toolContext)) classes.set(toolContext, Ctx);
  }
  return new Ctx(run, call);
}
