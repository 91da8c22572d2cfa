import type { Tool as McpTool } from '@modelcontextprotocol/sdk/types.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { type AnyTool, defineTool, type ToolContext, ToolResult, type ToolSpec } from '@troupe/core';
import { z } from 'zod';
import type { ResolvedMcpServerOptions } from '../McpServerOptions.js';
import { McpToolError } from '../McpToolError.js';
import { toToolResult } from '../toToolResult.js';
import type { Connection } from './Connection.js';
import { errorCode, serverLabel } from './describeFailure.js';

/** The longest a timer can wait (the SDK's own request timeout must never fire before ours). */
const NO_DEADLINE_MS = 2_147_483_647;
/** How long a cancelled call waits for its cancellation to be sent to the server. */
const CANCEL_FLUSH_MS = 2_000;

/** The tool's arguments checked here before they are sent: the server's JSON Schema, as zod reads it. */
function argumentSchema(inputSchema: Record<string, unknown>): z.ZodType {
  try {
    return z.fromJSONSchema(inputSchema as Parameters<typeof z.fromJSONSchema>[0]);
  } catch {
    // A schema zod cannot read (a remote $ref, a keyword it lacks): the server checks the arguments itself.
    return z.record(z.string(), z.unknown());
  }
}

/**
 * One of the server's tools as a Troupe tool: the server's JSON Schema is
 * what the model sees (as the server wrote it), and what the arguments are
 * checked against here; a call goes to this thread's connection, with the
 * tool's signal (a cancel or the deadline sends `notifications/cancelled`).
 */
export function toTroupeTool(
  tool: McpTool,
  name: string,
  settings: {
    readonly description: string | undefined;
    readonly requiresApproval: boolean;
    readonly timeoutMs: number | null;
    readonly retries: number;
    readonly idempotent: boolean;
  },
  server: ResolvedMcpServerOptions,
  connection: Connection,
): AnyTool {
  const description = settings.description ?? tool.description ?? tool.title ?? '';
  const where = { server: server.name, tool: tool.name };
  const defined = defineTool({
    name,
    description,
    parameters: argumentSchema(tool.inputSchema),
    requiresApproval: settings.requiresApproval,
    timeoutMs: settings.timeoutMs,
    retries: settings.retries,
    idempotent: settings.idempotent,
    execute: async (args: unknown, ctx: ToolContext) => {
      const live = await connection.live(ctx.signal);
      live.inFlight++;
      try {
        const result = await live.client.callTool(
          { name: tool.name, arguments: args as Record<string, unknown> },
          undefined,
          { signal: ctx.signal, timeout: ctx.timeoutMs ?? NO_DEADLINE_MS },
        );
        return toToolResult(result as Parameters<typeof toToolResult>[0], where);
      } catch (error) {
        if (ctx.signal.aborted) {
          // Cancelled or past its deadline: the SDK has sent `notifications/cancelled`; see it out.
          await live.transport.flushCancellations(CANCEL_FLUSH_MS);
          throw ctx.signal.reason;
        }
        // The server went away (the connection closed), or the request could not be sent (over
        // HTTP: refused, reset, an unknown session): this connection is done with.
        if (!(error instanceof McpError) || error.code === ErrorCode.ConnectionClosed) {
          connection.drop(live);
          const stderr = connection.stderrTail;
          const why =
            error instanceof McpError
              ? `went away during the call of "${tool.name}"${stderr === '' ? '' : ` (its stderr said: ${stderr.slice(0, 500)})`}`
              : `could not be reached for the call of "${tool.name}" (${errorCode(error) ?? (error instanceof Error ? error.message : String(error))})`;
          const failure = new McpToolError(
            `${serverLabel(server)} ${why}: the call may have been partly done${settings.idempotent ? '' : ' and is not retried'}; the next call starts a new connection`,
            { code: 'ERR_MCP_CONNECTION', server: server.name, tool: tool.name, cause: error },
          );
          // Thrown, an idempotent tool is tried again (the executor's retries); returned, no one re-runs it.
          if (settings.idempotent) throw failure;
          return ToolResult.error(failure);
        }
        return ToolResult.error(
          new McpToolError(
            `${serverLabel(server)} refused the call of "${tool.name}" (${error.code}: ${error.message.replace(/^MCP error -?\d+: /, '')})`,
            { code: 'ERR_MCP_REQUEST', server: server.name, tool: tool.name, mcpCode: error.code, cause: error },
          ),
        );
      } finally {
        live.inFlight--;
      }
    },
  });
  const { $schema: _dialect, ...parameters } = tool.inputSchema as Record<string, unknown>;
  const spec: ToolSpec = Object.freeze({ name, description, parameters: Object.freeze(parameters) });
  // The model sees the server's own schema, not zod's reading of it back.
  return Object.freeze({ ...defined, spec });
}
