import { InvalidArgumentError } from '@troupe/core';
import { z } from 'zod';

/**
 * What {@link mcpServer} accepts for a server it starts as a child process
 * and talks to over stdin and stdout.
 *
 * @example
 * ```ts
 * const files: McpStdioServerOptions = {
 *   name: 'files',
 *   command: 'npx',
 *   args: ['-y', '@modelcontextprotocol/server-filesystem', '/srv/docs'],
 * }
 * ```
 */
export interface McpStdioServerOptions {
  /** What messages and errors call the server (`files`): letters, digits, `_` and `-`. */
  readonly name: string;
  /** The program to start (`node`, `npx`, `uvx`, a path). */
  readonly command: string;
  readonly args?: readonly string[] | undefined;
  /**
   * Environment variables for the server, on top of the few the SDK passes
   * on (`PATH`, `HOME`, ...): the rest of this process's environment is not.
   */
  readonly env?: Readonly<Record<string, string>> | undefined;
  /** Its working directory (default: this process's). */
  readonly cwd?: string | undefined;
  /** The server's stderr: copied to this process's stderr (`inherit`, the default) or not (`ignore`). Its last lines name what went wrong either way. */
  readonly stderr?: 'inherit' | 'ignore' | undefined;
  /** How long starting the server and its handshake may take (default 30 s). */
  readonly connectTimeoutMs?: number | undefined;
}

/**
 * What {@link mcpServer} accepts for a server it reaches over Streamable HTTP.
 *
 * @example
 * ```ts
 * const tickets: McpHttpServerOptions = {
 *   name: 'tickets',
 *   url: 'http://127.0.0.1:3000/mcp',
 *   headers: { authorization: `Bearer ${process.env.TICKETS_TOKEN}` },
 * }
 * ```
 */
export interface McpHttpServerOptions {
  /** What messages and errors call the server (`tickets`): letters, digits, `_` and `-`. */
  readonly name: string;
  /** The server's MCP endpoint (`http://127.0.0.1:3000/mcp`). */
  readonly url: string;
  /** Headers sent with every request (where servers take tokens; never shown in a message). */
  readonly headers?: Readonly<Record<string, string>> | undefined;
  /** How long the connection and its handshake may take (default 30 s). */
  readonly connectTimeoutMs?: number | undefined;
}

/**
 * A server to take tools from: a command to start (stdio) or a URL (Streamable HTTP).
 *
 * @example
 * ```ts
 * const servers: McpServerOptions[] = [
 *   { name: 'files', command: 'node', args: ['files-server.js'] },
 *   { name: 'tickets', url: 'http://127.0.0.1:3000/mcp' },
 * ]
 * ```
 */
export type McpServerOptions = McpStdioServerOptions | McpHttpServerOptions;

/**
 * {@link McpServerOptions} validated and defaulted.
 *
 * @example
 * ```ts
 * const resolved: ResolvedMcpServerOptions = resolveMcpServerOptions({ name: 'files', command: 'node', args: ['server.js'] })
 * resolved.transport        // 'stdio'
 * resolved.connectTimeoutMs // 30000
 * ```
 */
export type ResolvedMcpServerOptions =
  | {
      readonly transport: 'stdio';
      readonly name: string;
      readonly command: string;
      readonly args: readonly string[];
      readonly env: Readonly<Record<string, string>>;
      readonly cwd: string | undefined;
      readonly stderr: 'inherit' | 'ignore';
      readonly connectTimeoutMs: number;
    }
  | {
      readonly transport: 'http';
      readonly name: string;
      readonly url: string;
      readonly headers: Readonly<Record<string, string>>;
      readonly connectTimeoutMs: number;
    };

const MAX_TIMER_MS = 2_147_483_647;
const NAME = /^[A-Za-z0-9_-]{1,64}$/;

const Common = {
  name: z.string().regex(NAME),
  connectTimeoutMs: z.number().int().min(1).max(MAX_TIMER_MS).optional(),
};
const Stdio = z.strictObject({
  ...Common,
  command: z.string().trim().min(1),
  args: z.array(z.string()).optional(),
  env: z.record(z.string(), z.string()).optional(),
  cwd: z.string().min(1).optional(),
  stderr: z.enum(['inherit', 'ignore']).optional(),
});
const Http = z.strictObject({
  ...Common,
  url: z.url({ protocol: /^https?$/ }),
  headers: z.record(z.string(), z.string()).optional(),
});

const HINTS: Record<string, string> = {
  name: 'pass a name of letters, digits, _ and - (at most 64), e.g. "files"',
  command: 'pass the program to start, e.g. command: "node", args: ["server.js"]',
  args: 'pass an array of strings',
  env: 'pass an object of strings',
  cwd: 'pass a directory path',
  stderr: 'pass "inherit" or "ignore"',
  url: 'pass the http(s) URL of the server\'s MCP endpoint, e.g. "http://127.0.0.1:3000/mcp"',
  headers: 'pass an object of strings',
  connectTimeoutMs: 'pass a whole number of milliseconds from 1 to 2147483647',
};

/**
 * Validate a server's options once, at the edge. A bad option throws an
 * `InvalidArgumentError` naming it and what to pass (secrets — `env` and
 * `headers` values — are never repeated). `mcpServer` calls it.
 *
 * @example
 * ```ts
 * resolveMcpServerOptions({ name: 'tickets', url: 'http://127.0.0.1:3000/mcp' }).transport // 'http'
 * ```
 */
export function resolveMcpServerOptions(options: McpServerOptions): ResolvedMcpServerOptions {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidArgumentError(
      'mcpServer: pass an options object, e.g. mcpServer({ name: "files", command: "node", args: ["server.js"] })',
    );
  }
  const given = Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined));
  const hasCommand = 'command' in given;
  const hasUrl = 'url' in given;
  if (hasCommand === hasUrl) {
    throw new InvalidArgumentError(
      `mcpServer: ${hasCommand ? 'both command and url are given' : 'neither command nor url is given'}: pass command (and args) for a server to start over stdio, or url for a Streamable HTTP server`,
    );
  }
  const parsed = (hasCommand ? Stdio : Http).safeParse(given);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const key = String(issue?.path[0] ?? '');
    const value = (given as Record<string, unknown>)[key];
    const shown = key === 'env' || key === 'headers' ? '(hidden)' : safeShow(value);
    const what = issue?.code === 'unrecognized_keys' ? `unknown option ${issue.keys.join(', ')}` : `${key} is invalid`;
    const hint =
      issue?.code === 'unrecognized_keys'
        ? hasCommand
          ? 'a stdio server takes name, command, args, env, cwd, stderr and connectTimeoutMs'
          : 'an HTTP server takes name, url, headers and connectTimeoutMs'
        : (HINTS[key] ?? issue?.message ?? '');
    const label = typeof given.name === 'string' ? `mcpServer(${JSON.stringify(given.name)})` : 'mcpServer';
    throw new InvalidArgumentError(
      `${label}: ${what}${issue?.code === 'unrecognized_keys' ? '' : ` (got ${shown})`}: ${hint}`,
    );
  }
  const connectTimeoutMs = parsed.data.connectTimeoutMs ?? 30_000;
  if ('command' in parsed.data) {
    const o = parsed.data;
    return Object.freeze({
      transport: 'stdio' as const,
      name: o.name,
      command: o.command,
      args: Object.freeze([...(o.args ?? [])]),
      env: Object.freeze({ ...(o.env ?? {}) }),
      cwd: o.cwd,
      stderr: o.stderr ?? 'inherit',
      connectTimeoutMs,
    });
  }
  const o = parsed.data as z.output<typeof Http>;
  return Object.freeze({
    transport: 'http' as const,
    name: o.name,
    url: o.url,
    headers: Object.freeze({ ...(o.headers ?? {}) }),
    connectTimeoutMs,
  });
}

function safeShow(value: unknown): string {
  try {
    const text = typeof value === 'string' ? JSON.stringify(value) : (JSON.stringify(value) ?? String(value));
    return text.length > 80 ? `${text.slice(0, 77)}...` : text;
  } catch {
    return String(value);
  }
}
