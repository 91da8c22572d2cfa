import type { Tool as McpTool } from '@modelcontextprotocol/sdk/types.js';
import { type AnyTool, InvalidArgumentError } from '@troupe/core';
import { Connection } from './internal/Connection.js';
import { toTroupeTool } from './internal/toTroupeTool.js';
import { type McpServerOptions, type ResolvedMcpServerOptions, resolveMcpServerOptions } from './McpServerOptions.js';
import { type McpToolsOptions, resolveMcpToolsOptions } from './McpToolsOptions.js';

/**
 * A tool as the server lists it.
 *
 * @example
 * ```ts
 * declare const files: McpServerHandle
 * const listed: readonly McpToolInfo[] = await files.listTools()
 * console.log(listed.map((t) => `${t.name}: ${t.description ?? ''}`))
 * ```
 */
export type McpToolInfo = McpTool;

/**
 * One MCP server, as this thread talks to it: {@link mcpServer} makes it.
 *
 * @example
 * ```ts
 * const files: McpServerHandle = mcpServer({ name: 'files', command: 'node', args: ['files-server.js'] })
 * const tools = await files.tools({ tools: { write_file: { requiresApproval: true } } })
 * await files.close()
 * ```
 */
export interface McpServerHandle {
  readonly name: string;
  /** The options in force (secrets included: do not log them). */
  readonly options: ResolvedMcpServerOptions;
  /**
   * The server's tools as Troupe tools (connecting first if this thread has
   * no connection): their JSON Schemas as parameters, each call sent on this
   * thread's connection. Fails with `ERR_MCP_CONNECTION` if the server
   * cannot be reached, and with `ERR_INVALID_ARGUMENT` for an option that
   * names a tool the server does not have.
   */
  tools(options?: McpToolsOptions): Promise<AnyTool[]>;
  /** Every tool the server lists (all pages), as it lists them. */
  listTools(options?: { readonly signal?: AbortSignal | undefined }): Promise<readonly McpToolInfo[]>;
  /** End this thread's connection (a stdio server is stopped). Idempotent; later calls fail with `ERR_CLOSED`. */
  close(): Promise<void>;
  /** `close()`. */
  [Symbol.asyncDispose](): Promise<void>;
}

const NAME = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * An MCP server whose tools agents can use: a command started as a child
 * process (stdio) or a Streamable HTTP endpoint. Made with the official MCP
 * SDK's client.
 *
 * - **Where the client lives:** in every thread that uses it, one connection
 *   per handle (so per thread that imports the module the handle is made
 *   in): a subagent's calls go from its worker straight to the server, with
 *   no hop through the supervisor thread. A stdio server is started once per
 *   such thread, and ends with it (or with `close()`). Measured cost and the
 *   alternative: the package README.
 * - **When it connects:** on the first `tools()` or `listTools()` (made at
 *   the top level of an agent module, with `await`), and again on the next
 *   call after the server went away.
 * - **Cancellation:** a cancelled run, or a call past its `timeoutMs`, sends
 *   the server `notifications/cancelled` for the call, and the call ends at
 *   once here (a `CancelledError` or a `ToolTimeoutError`, as for every tool).
 * - **Close it** on the host thread when you are done (`await files.close()`,
 *   or `await using`): a stdio server's process keeps the host's event loop
 *   alive until then.
 *
 * Options are checked here, once: a bad one throws an `InvalidArgumentError`.
 *
 * @example
 * ```ts
 * // agents/researcher.ts — loaded by every thread that runs the agent
 * import { defineAgent } from '@troupe/core'
 *
 * const files = mcpServer({ name: 'files', command: 'node', args: ['files-server.js'] })
 * export const researcher = defineAgent({
 *   name: 'researcher',
 *   module: import.meta.url,
 *   instructions: 'Answer from the files.',
 *   model,
 *   tools: await files.tools({ include: ['read_file', 'search'], timeoutMs: 60_000 }),
 * })
 * ```
 */
export function mcpServer(options: McpServerOptions): McpServerHandle {
  const resolved = resolveMcpServerOptions(options);
  const connection = new Connection(resolved);
  const where = `mcpServer(${JSON.stringify(resolved.name)}).tools`;

  const listTools = async (opts: { readonly signal?: AbortSignal | undefined } = {}): Promise<McpToolInfo[]> => {
    const { client } = await connection.live(opts.signal);
    const listed: McpToolInfo[] = [];
    let cursor: string | undefined;
    do {
      const page = await client.listTools(
        cursor === undefined ? undefined : { cursor },
        opts.signal === undefined ? undefined : { signal: opts.signal },
      );
      listed.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    return listed;
  };

  const tools = async (toolsOptions: McpToolsOptions = {}): Promise<AnyTool[]> => {
    const o = resolveMcpToolsOptions(toolsOptions, where);
    const listed = await listTools();
    const byName = new Map(listed.map((t) => [t.name, t]));
    const known = (name: string, option: string): void => {
      if (!byName.has(name)) {
        throw new InvalidArgumentError(
          `${where}: ${option} names "${name}", which the server does not list (it has ${[...byName.keys()].map((n) => `"${n}"`).join(', ') || 'no tools'})`,
        );
      }
    };
    for (const name of o.include ?? []) known(name, 'include');
    for (const name of Object.keys(o.tools)) known(name, 'tools');
    const chosen = o.include === undefined ? listed : o.include.map((n) => byName.get(n) as McpToolInfo);
    const names = new Map<string, string>();
    return chosen.map((tool) => {
      const settings = o.tools[tool.name] ?? {};
      const name = settings.name ?? `${o.prefix}${tool.name.replace(/[^A-Za-z0-9_-]/g, '_')}`;
      if (!NAME.test(name)) {
        throw new InvalidArgumentError(
          `${where}: the tool "${tool.name}" would be named "${name}", which is not 1 to 64 letters, digits, _ or -: give it a name with tools: { ${JSON.stringify(tool.name)}: { name: "..." } }`,
        );
      }
      const clash = names.get(name);
      if (clash !== undefined) {
        throw new InvalidArgumentError(
          `${where}: the tools "${clash}" and "${tool.name}" would both be named "${name}": rename one with tools: { ${JSON.stringify(tool.name)}: { name: "..." } }`,
        );
      }
      names.set(name, tool.name);
      return toTroupeTool(
        tool,
        name,
        {
          description: settings.description,
          requiresApproval: settings.requiresApproval ?? o.requiresApproval,
          timeoutMs: settings.timeoutMs === undefined ? o.timeoutMs : settings.timeoutMs,
          retries: settings.retries ?? o.retries,
          idempotent: settings.idempotent ?? false,
        },
        resolved,
        connection,
      );
    });
  };

  const close = (): Promise<void> => connection.close();
  return Object.freeze({
    name: resolved.name,
    options: resolved,
    tools,
    listTools,
    close,
    [Symbol.asyncDispose]: close,
  });
}
