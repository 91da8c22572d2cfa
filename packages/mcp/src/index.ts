/**
 * @troupe/mcp — the tools of MCP servers (a command over stdio, or a
 * Streamable HTTP endpoint) as Troupe tools, on the official MCP SDK's
 * client: their JSON Schemas as parameters, results mapped to `ToolResult`,
 * approval and a deadline per tool, the run's cancel sent to the server as
 * MCP cancellation.
 */
export {
  type McpHttpServerOptions,
  type McpServerOptions,
  type McpStdioServerOptions,
  type ResolvedMcpServerOptions,
  resolveMcpServerOptions,
} from './McpServerOptions.js';
export { McpToolError, type McpToolErrorCode, type McpToolErrorDetails } from './McpToolError.js';
export {
  type McpToolSettings,
  type McpToolsOptions,
  type ResolvedMcpToolsOptions,
  resolveMcpToolsOptions,
} from './McpToolsOptions.js';
export { type McpServerHandle, type McpToolInfo, mcpServer } from './mcpServer.js';
export { toToolResult } from './toToolResult.js';
