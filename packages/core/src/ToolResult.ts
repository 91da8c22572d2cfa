import { assertCloneable } from './assertCloneable.js';
import { assertJson, type ContextUpdate } from './ContextUpdate.js';
import { createId } from './Id.js';
import { Request } from './Request.js';
import { InvalidArgumentError, TroupeError } from './TroupeError.js';

const TOOL_RESULT = Symbol.for('troupe.toolResult');

/**
 * Any thrown or returned failure as an `Error`: an `Error` as it is; anything
 * else (a string, an object, `undefined`) as a `TroupeError` (`ERR_TOOL_FAILED`)
 * whose message shows the value and whose `cause` keeps it.
 *
 * @example
 * ```ts
 * asError(new RangeError('x')) // the same RangeError
 * asError('quota exceeded')    // TroupeError 'quota exceeded', code ERR_TOOL_FAILED
 * ```
 */
export function asError(value: unknown): Error {
  if (value instanceof Error) return value;
  if (typeof value === 'string') return new TroupeError(value, { code: 'ERR_TOOL_FAILED' });
  let shown: string;
  try {
    shown = value === undefined ? 'undefined' : (JSON.stringify(value) ?? String(value));
  } catch {
    shown = Object.prototype.toString.call(value);
  }
  if (shown.length > 200) shown = `${shown.slice(0, 200)}…`;
  return new TroupeError(`the tool failed with a value that is not an Error: ${shown}`, {
    code: 'ERR_TOOL_FAILED',
    cause: value,
  });
}

/**
 * A tool's explicit outcome. Return a plain value for the common `ok` case.
 *
 * Read by the runtime, not written by hand: build one with the `ToolResult`
 * functions.
 *
 * @example
 * ```ts
 * const result: ToolResult<number> = ToolResult.ok(42)
 * if (result.status === 'ok') console.log(result.value)
 * ```
 */
export type ToolResult<T = unknown> =
  | {
      readonly [TOOL_RESULT]: true;
      readonly status: 'ok';
      readonly value: T;
      readonly update: ContextUpdate | undefined;
    }
  | {
      readonly [TOOL_RESULT]: true;
      readonly status: 'error';
      readonly error: Error;
      readonly update: ContextUpdate | undefined;
    }
  | { readonly [TOOL_RESULT]: true; readonly status: 'pending'; readonly request: Request };

/**
 * A request as a tool writes it: the id is minted when left out.
 *
 * @example
 * ```ts
 * const input: RequestInput = { kind: 'input', prompt: 'Which account?', data: { options: ['savings', 'current'] } }
 * const result = ToolResult.pending(input) // the id is minted: 'req_…'
 * ```
 */
export type RequestInput = Omit<Request, 'id'> & { readonly id?: string | undefined };

/**
 * `request` checked as a question a run can suspend on (`where` opens the
 * error's message): a frozen {@link Request}, or the `InvalidArgumentError`
 * that says what is wrong. Its `data` crosses threads and is saved with the
 * run as JSON, so a value that cannot do both is refused too. Used by
 * `ToolResult.pending` (which throws it) and by the executor, for a `pending`
 * result that did not come from there (built by hand, or changed after).
 */
export function checkRequest(request: unknown, where: string): Request | InvalidArgumentError {
  try {
    const parsed = Request.safeParse(request);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const path = issue === undefined || issue.path.length === 0 ? 'request' : `request.${issue.path.join('.')}`;
      return new InvalidArgumentError(
        `${where}: ${path}: ${issue?.message ?? 'invalid'}; pass { kind, prompt, data?, expiresAt? }`,
        { cause: parsed.error },
      );
    }
    // A question is saved with its run (JSON): a value JSON cannot carry is refused here too.
    if (parsed.data.data !== undefined) {
      // It crosses threads, and is saved as JSON.
      assertCloneable(parsed.data.data, `${where}: request.data`);
      assertJson(parsed.data.data, `${where}: request.data`, { undefinedPropertiesAreAbsent: true });
    }
    return Object.freeze(parsed.data);
  } catch (error) {
    if (error instanceof InvalidArgumentError) return error;
    // Reading it threw (a getter, a proxy), or a check refused it with an error of its own.
    return new InvalidArgumentError(
      `${where}: the request cannot be read (${error instanceof Error ? error.message : String(error)}); pass { kind, prompt, data?, expiresAt? }`,
      { cause: error },
    );
  }
}

/**
 * Build a tool's outcome.
 *
 * - `ToolResult.ok(value, update?)` — success, with an optional `ContextUpdate`.
 * - `ToolResult.error(message | Error, update?)` — a failure the model sees;
 *   a returned error is never retried (throw to be retried).
 * - `ToolResult.pending(request)` — suspend the run and ask a person; the tool
 *   is re-run exactly once with `ctx.answer` when the host answers.
 *
 * @example
 * ```ts
 * const charge = defineTool({
 *   name: 'charge',
 *   description: 'Charge the card',
 *   parameters: z.object({ cents: z.number().int() }),
 *   execute: ({ cents }) => (cents > 0 ? ToolResult.ok({ charged: cents }) : ToolResult.error('cents must be positive')),
 * })
 * ```
 */
export const ToolResult = Object.freeze({
  ok<T>(value: T, update?: ContextUpdate): ToolResult<T> {
    return Object.freeze({ [TOOL_RESULT]: true as const, status: 'ok' as const, value, update });
  },
  error(error: string | Error, update?: ContextUpdate): ToolResult<never> {
    const err = asError(error);
    return Object.freeze({ [TOOL_RESULT]: true as const, status: 'error' as const, error: err, update });
  },
  pending(request: RequestInput): ToolResult<never> {
    const id = request?.id === undefined || request.id === '' ? createId('req') : request.id;
    // Checked here, in the tool that wrote it, rather than when the host
    // receives a request it cannot show.
    const checked = checkRequest({ ...request, id }, 'ToolResult.pending');
    if (checked instanceof Error) throw checked;
    return Object.freeze({
      [TOOL_RESULT]: true as const,
      status: 'pending' as const,
      request: checked,
    });
  },
  /** True for a value built by `ToolResult.*`. */
  is(value: unknown): value is ToolResult {
    return typeof value === 'object' && value !== null && (value as { [TOOL_RESULT]?: unknown })[TOOL_RESULT] === true;
  },
});
