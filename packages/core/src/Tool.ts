import type { z } from 'zod';
import { describeValue } from './internal/describeValue.js';
import { toJsonSchema } from './internal/toJsonSchema.js';
import type { ToolContext } from './ToolContext.js';
import type { ToolResult } from './ToolResult.js';
import type { ToolSpec } from './ToolSpec.js';
import { InvalidArgumentError } from './TroupeError.js';

export type { ToolSpec } from './ToolSpec.js';

/**
 * Default extra attempts after a thrown error.
 *
 * @example
 * ```ts
 * const ping = defineTool({ name: 'ping', description: 'Answer pong', parameters: z.object({}), execute: () => 'pong' })
 * ping.retries === DEFAULT_TOOL_RETRIES // true: one retry after a thrown error
 * ```
 */
export const DEFAULT_TOOL_RETRIES = 1;
/**
 * Default per-attempt timeout.
 *
 * A tool that may take longer sets its own `timeoutMs` (`null`: none).
 *
 * @example
 * ```ts
 * const ping = defineTool({ name: 'ping', description: 'Answer pong', parameters: z.object({}), execute: () => 'pong' })
 * ping.timeoutMs === DEFAULT_TOOL_TIMEOUT_MS // true: 30 s per attempt
 * ```
 */
export const DEFAULT_TOOL_TIMEOUT_MS = 30_000;

/**
 * What a tool's `execute` may return: a value, or a {@link ToolResult} (which may carry a `ContextUpdate`).
 *
 * @example
 * ```ts
 * const lookup = (id: string): ToolReturn<{ id: string }> => (id === '' ? ToolResult.error('id is empty') : { id })
 * ```
 */
export type ToolReturn<R> = R | ToolResult<R>;

/**
 * What you pass to {@link defineTool}. `S` and `TC` are the scope and the
 * `toolContext` shape the tool reads, inferred from the type of `execute`'s
 * `ctx` (see {@link ToolContext}); undeclared, they read as `unknown`.
 *
 * @example
 * ```ts
 * const parameters = z.object({ to: z.string(), body: z.string() })
 * const definition: ToolDefinition<typeof parameters, string> = {
 *   name: 'send_email',
 *   description: 'Send an email',
 *   parameters,
 *   execute: ({ to }) => `sent to ${to}`,
 *   retries: 0, // sending twice is worse than failing
 *   timeoutMs: 10_000,
 *   requiresApproval: true,
 * }
 * const sendEmail = defineTool(definition)
 * ```
 */
export interface ToolDefinition<P extends z.ZodType, R, S = unknown, TC extends object = Record<never, never>> {
  /** `[A-Za-z0-9_-]{1,64}`, unique within an agent. */
  readonly name: string;
  readonly description: string;
  /** zod schema of the arguments; the model's arguments are validated before `execute` runs. */
  readonly parameters: P;
  /** Runs the tool. Throw to be retried; return `ToolResult.error` to fail without retry. */
  readonly execute: (args: z.output<P>, ctx: ToolContext<S, TC>) => ToolReturn<R> | Promise<ToolReturn<R>>;
  /** Extra attempts after a thrown error (default 1; 0 makes one attempt). */
  readonly retries?: number;
  /** Per-attempt timeout in ms (default 30 000; 0 or null: none). A timeout is terminal. */
  readonly timeoutMs?: number | null;
  /** Ask the host's approval handler first (default false). */
  readonly requiresApproval?: boolean;
  /**
   * Safe to run again after a crash interrupted it (default false): its side
   * effect, if any, does not repeat harmfully. A tool that is not is never
   * re-run after a restart found it started but not committed — the model
   * gets an `ERR_INTERRUPTED` error result instead.
   */
  readonly idempotent?: boolean;
}

/**
 * A defined tool: validated, frozen, with its model-facing spec. `S` and `TC`
 * are what it reads from the scope and the `toolContext`: an agent holding it
 * must provide at least that (see {@link ToolContext}).
 *
 * @example
 * ```ts
 * const ping: Tool = defineTool({ name: 'ping', description: 'Answer pong', parameters: z.object({}), execute: () => 'pong' })
 * ping.spec // { name: 'ping', description: 'Answer pong', parameters: { type: 'object', ... } }
 * ```
 */
export interface Tool<
  P extends z.ZodType = z.ZodType,
  R = unknown,
  S = unknown,
  TC extends object = Record<never, never>,
> {
  readonly name: string;
  readonly description: string;
  readonly parameters: P;
  readonly execute: (args: z.output<P>, ctx: ToolContext<S, TC>) => ToolReturn<R> | Promise<ToolReturn<R>>;
  readonly retries: number;
  /** `null` when the tool has no timeout. */
  readonly timeoutMs: number | null;
  readonly requiresApproval: boolean;
  /** Safe to re-run after a crash interrupted it (see {@link ToolDefinition.idempotent}). */
  readonly idempotent: boolean;
  /** The spec a model sees (JSON Schema computed once, on first use). */
  readonly spec: ToolSpec;
}

/**
 * A tool of any argument, result, scope and tool-context type, as the runtime holds them.
 *
 * Use it for a list of tools of different types; {@link defineAgent} keeps the
 * precise types of the tools it is given.
 *
 * @example
 * ```ts
 * const ping = defineTool({ name: 'ping', description: 'Answer pong', parameters: z.object({}), execute: () => 'pong' })
 * const tools: AnyTool[] = [ping]
 * ```
 */
// biome-ignore lint/suspicious/noExplicitAny: the variance of `execute` requires it for heterogeneous lists.
export type AnyTool = Tool<any, any, any, any>;

const NAME = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * Define a tool: a zod parameter schema, an `execute`
 * function, retries, a terminal timeout and optional approval.
 *
 * Order of execution: approval → argument validation → attempts. Approval and
 * validation failures are never retried; a thrown error is retried up to
 * `retries` times; a returned `ToolResult.error` is not; a timeout is terminal.
 *
 * Annotate `ctx` with a {@link ToolContext} to declare the scope and the
 * `toolContext` keys the tool reads: they are then typed in `execute`, and
 * carried to every agent that holds the tool.
 *
 * @example
 * ```ts
 * const add = defineTool({
 *   name: 'add_note',
 *   description: 'Remember a note',
 *   parameters: z.object({ note: z.string() }),
 *   execute: ({ note }) => ToolResult.ok({ added: note }, ContextUpdate.empty().append('notes', note)),
 * })
 * ```
 */
export function defineTool<P extends z.ZodType, R, S = unknown, TC extends object = Record<never, never>>(
  definition: ToolDefinition<P, R, S, TC>,
): Tool<P, R, S, TC> {
  const rawName: unknown = (definition as { name?: unknown } | null | undefined)?.name;
  // String() rather than JSON.stringify alone: a bigint name would make the message itself throw.
  const where = `defineTool(${describeValue(rawName)})`;
  if (typeof definition !== 'object' || definition === null)
    throw new InvalidArgumentError('defineTool: pass a definition object');
  if (typeof definition.name !== 'string' || !NAME.test(definition.name)) {
    throw new InvalidArgumentError(`${where}: name must match ${NAME} (models only accept such names)`);
  }
  if (typeof definition.description !== 'string')
    throw new InvalidArgumentError(`${where}: description must be a string`);
  if (typeof (definition.parameters as { safeParse?: unknown })?.safeParse !== 'function') {
    throw new InvalidArgumentError(`${where}: parameters must be a zod schema, e.g. z.object({ ... })`);
  }
  if (typeof definition.execute !== 'function') throw new InvalidArgumentError(`${where}: execute must be a function`);
  const retries = definition.retries ?? DEFAULT_TOOL_RETRIES;
  if (!Number.isSafeInteger(retries) || retries < 0 || retries > 100) {
    throw new InvalidArgumentError(`${where}: retries must be an integer from 0 to 100, got ${describeValue(retries)}`);
  }
  const rawTimeout = definition.timeoutMs === undefined ? DEFAULT_TOOL_TIMEOUT_MS : definition.timeoutMs;
  if (rawTimeout !== null && (typeof rawTimeout !== 'number' || !Number.isFinite(rawTimeout) || rawTimeout < 0)) {
    throw new InvalidArgumentError(`${where}: timeoutMs must be a non-negative number of ms, 0 or null for none`);
  }
  const timeoutMs = rawTimeout === null || rawTimeout === 0 ? null : rawTimeout;
  // A gate must not fail open: `requiresApproval: 'yes'` would otherwise run the tool unasked.
  for (const flag of ['requiresApproval', 'idempotent'] as const) {
    const value: unknown = definition[flag];
    if (value !== undefined && typeof value !== 'boolean') {
      throw new InvalidArgumentError(`${where}: ${flag} must be true or false, got ${describeValue(value)}`);
    }
  }
  let spec: ToolSpec | undefined;
  const tool: Tool<P, R, S, TC> = {
    name: definition.name,
    description: definition.description,
    parameters: definition.parameters,
    execute: definition.execute,
    retries,
    timeoutMs,
    requiresApproval: definition.requiresApproval === true,
    idempotent: definition.idempotent === true,
    get spec(): ToolSpec {
      spec ??= Object.freeze({
        name: definition.name,
        description: definition.description,
        parameters: Object.freeze(toJsonSchema(definition.parameters)),
      });
      return spec;
    },
  };
  return Object.freeze(tool);
}
