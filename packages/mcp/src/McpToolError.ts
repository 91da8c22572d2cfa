import { TroupeError } from '@troupe/core';

/**
 * The codes a {@link McpToolError} carries.
 *
 * @example
 * ```ts
 * const serverTrouble: McpToolErrorCode[] = ['ERR_MCP_CONNECTION', 'ERR_MCP_REQUEST']
 * ```
 */
export type McpToolErrorCode = 'ERR_MCP_CONNECTION' | 'ERR_MCP_REQUEST' | 'ERR_TOOL_FAILED';

/**
 * What a {@link McpToolError} says beyond its message.
 *
 * @example
 * ```ts
 * const details: McpToolErrorDetails = { code: 'ERR_MCP_REQUEST', server: 'files', tool: 'read_file', mcpCode: -32602 }
 * ```
 */
export interface McpToolErrorDetails {
  readonly code: McpToolErrorCode;
  /** The server's name, as given to `mcpServer`. */
  readonly server: string;
  /** The tool's name on the server, when the error is about a call. */
  readonly tool?: string | undefined;
  /** The JSON-RPC error code the server answered with (`-32602` invalid params, ...), when it did. */
  readonly mcpCode?: number | undefined;
  readonly cause?: unknown;
}

/**
 * An MCP tool failed. `code` says how:
 *
 * | code | when | what the model sees |
 * |---|---|---|
 * | `ERR_TOOL_FAILED` | the tool answered with `isError: true` | the tool's own text |
 * | `ERR_MCP_REQUEST` | the server refused the call (unknown tool, invalid arguments, its own failure) | the server's message |
 * | `ERR_MCP_CONNECTION` | the server could not be started or reached, or went away during the call | what happened; the next call starts it again |
 *
 * A call the server went away during is not retried (it may have been partly
 * done) unless its tool is declared `idempotent`; one that could not connect
 * is retried as the tool's `retries` say. A cancelled or timed-out call is a
 * `CancelledError` or a `ToolTimeoutError`, as for every tool.
 *
 * @example
 * ```ts
 * import { isTroupeError } from '@troupe/core'
 *
 * const err: unknown = new McpToolError('the MCP server "files" went away during the call of "read_file"', {
 *   code: 'ERR_MCP_CONNECTION',
 *   server: 'files',
 *   tool: 'read_file',
 * })
 * if (isTroupeError(err, 'ERR_MCP_CONNECTION')) console.warn((err as McpToolError).server)
 * ```
 */
export class McpToolError extends TroupeError {
  override readonly name: string = 'McpToolError';
  declare readonly code: McpToolErrorCode;
  readonly server: string;
  readonly tool: string | undefined;
  readonly mcpCode: number | undefined;

  constructor(message: string, details: McpToolErrorDetails) {
    super(message, details.cause === undefined ? { code: details.code } : { code: details.code, cause: details.cause });
    this.server = details.server;
    this.tool = details.tool;
    this.mcpCode = details.mcpCode;
  }

  override toData(): Record<string, unknown> {
    const data: Record<string, unknown> = { server: this.server };
    if (this.tool !== undefined) data.tool = this.tool;
    if (this.mcpCode !== undefined) data.mcpCode = this.mcpCode;
    return data;
  }
}
