import { InvalidArgumentError } from '@troupe/core';
import { z } from 'zod';

/**
 * How one of a server's tools is offered to an agent; every field overrides
 * the default of {@link McpToolsOptions}.
 *
 * @example
 * ```ts
 * const write: McpToolSettings = { requiresApproval: true, timeoutMs: 10_000 }
 * const search: McpToolSettings = { name: 'search_docs', timeoutMs: 120_000, retries: 1, idempotent: true }
 * ```
 */
export interface McpToolSettings {
  /** The tool's name for the agent and the model (default: the prefix and the server's name). */
  readonly name?: string | undefined;
  /** What the model reads about the tool (default: the server's description). */
  readonly description?: string | undefined;
  /** Ask the host's approval handler before each call. */
  readonly requiresApproval?: boolean | undefined;
  /** Per-attempt deadline in ms; `null` or 0: none. At the deadline the call is cancelled on the server too. */
  readonly timeoutMs?: number | null | undefined;
  /** Extra attempts after a failure to connect (or, for an idempotent tool, a server that went away). */
  readonly retries?: number | undefined;
  /** Safe to run again: a call the server went away during is retried, and re-run after a crash. */
  readonly idempotent?: boolean | undefined;
}

/**
 * Which of a server's tools an agent gets, and how.
 *
 * The server's annotations (`readOnlyHint`, `destructiveHint`,
 * `idempotentHint`) are hints from the server, not promises: nothing here is
 * set from them. Say what a tool may do with `tools`.
 *
 * @example
 * ```ts
 * const options: McpToolsOptions = {
 *   include: ['read_file', 'write_file'],
 *   prefix: 'files_',
 *   timeoutMs: 20_000,
 *   tools: { write_file: { requiresApproval: true } },
 * }
 * ```
 */
export interface McpToolsOptions {
  /** Only these tools, by their names on the server (default: all it lists). */
  readonly include?: readonly string[] | undefined;
  /** Put before each tool's name for the agent (`files_` → `files_read_file`), to keep servers apart. */
  readonly prefix?: string | undefined;
  /** Default for every tool: ask for approval (default `false`). */
  readonly requiresApproval?: boolean | undefined;
  /** Default for every tool: per-attempt deadline in ms (default 30 000; `null` or 0: none). */
  readonly timeoutMs?: number | null | undefined;
  /** Default for every tool: extra attempts (default 0). */
  readonly retries?: number | undefined;
  /** Settings of single tools, by their names on the server. */
  readonly tools?: Readonly<Record<string, McpToolSettings>> | undefined;
}

/**
 * {@link McpToolsOptions}, checked and defaulted.
 *
 * @example
 * ```ts
 * const resolved: ResolvedMcpToolsOptions = resolveMcpToolsOptions({ include: ['read_file'] })
 * resolved.retries  // 0
 * resolved.prefix   // ''
 * ```
 */
export interface ResolvedMcpToolsOptions {
  readonly include: readonly string[] | undefined;
  readonly prefix: string;
  readonly requiresApproval: boolean;
  readonly timeoutMs: number | null;
  readonly retries: number;
  readonly tools: Readonly<Record<string, McpToolSettings>>;
}

const timeout = z.union([z.number().finite().min(0), z.null()]).optional();
const retries = z.number().int().min(0).max(100).optional();
const Settings = z.strictObject({
  name: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,64}$/)
    .optional(),
  description: z.string().optional(),
  requiresApproval: z.boolean().optional(),
  timeoutMs: timeout,
  retries,
  idempotent: z.boolean().optional(),
});
const Schema = z.strictObject({
  include: z.array(z.string().min(1)).optional(),
  prefix: z
    .string()
    .regex(/^[A-Za-z0-9_-]{0,63}$/)
    .optional(),
  requiresApproval: z.boolean().optional(),
  timeoutMs: timeout,
  retries,
  tools: z.record(z.string(), Settings).optional(),
});

const HINTS: Record<string, string> = {
  include: 'pass an array of the server\'s tool names, e.g. ["read_file"]',
  prefix: 'pass letters, digits, _ and - (at most 63), e.g. "files_"',
  requiresApproval: 'pass true or false',
  timeoutMs: 'pass a number of milliseconds, or null (or 0) for none',
  retries: 'pass an integer from 0 to 100',
  tools: "pass settings by the server's tool names, e.g. { write_file: { requiresApproval: true } }",
  name: 'pass letters, digits, _ and - (at most 64)',
};

/**
 * Check a `tools()` call's options. A bad option throws an
 * `InvalidArgumentError` naming it and what to pass.
 *
 * @example
 * ```ts
 * resolveMcpToolsOptions({ prefix: 'files_' }).timeoutMs // 30000
 * ```
 */
export function resolveMcpToolsOptions(options: McpToolsOptions = {}, where = 'tools'): ResolvedMcpToolsOptions {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidArgumentError(`${where}: pass an options object, e.g. { include: ["read_file"] }`);
  }
  const parsed = Schema.safeParse(options);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const path = (issue?.path ?? []).map(String);
    const key = path.at(-1) ?? '';
    const what =
      issue?.code === 'unrecognized_keys'
        ? `unknown option ${issue.keys.join(', ')}${path.length > 0 ? ` in ${path.join('.')}` : ''}`
        : `${path.join('.')} is invalid`;
    throw new InvalidArgumentError(`${where}: ${what}: ${HINTS[key] ?? HINTS[path[0] ?? ''] ?? issue?.message ?? ''}`);
  }
  const o = parsed.data;
  return Object.freeze({
    include: o.include === undefined ? undefined : Object.freeze([...o.include]),
    prefix: o.prefix ?? '',
    requiresApproval: o.requiresApproval ?? false,
    timeoutMs: o.timeoutMs === undefined ? 30_000 : o.timeoutMs,
    retries: o.retries ?? 0,
    tools: Object.freeze({ ...(o.tools ?? {}) }) as Readonly<Record<string, McpToolSettings>>,
  });
}
