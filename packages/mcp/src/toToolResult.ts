import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { ToolResult } from '@troupe/core';
import { McpToolError } from './McpToolError.js';

/** The longest tool text an error message quotes. */
const MAX_ERROR_TEXT = 2_000;

/**
 * What an MCP tool answered, as the {@link ToolResult} the agent's model sees:
 *
 * - `isError: true` → an error result (`McpToolError`, code `ERR_TOOL_FAILED`)
 *   whose message is the tool's text;
 * - `structuredContent` → that object (the text beside it only repeats it);
 * - text only → the text (several blocks joined by a blank line);
 * - anything else (images, audio, resources) → the content blocks, as plain
 *   objects (`{ type: 'image', mimeType, data }`, ...), without `_meta`.
 *
 * @example
 * ```ts
 * const result = toToolResult(
 *   { content: [{ type: 'text', text: '21' }], structuredContent: { sum: 21 } },
 *   { server: 'calc', tool: 'add' },
 * )
 * result.status === 'ok' && result.value // { sum: 21 }
 * ```
 */
export function toToolResult(
  result: CallToolResult,
  where: { readonly server: string; readonly tool: string },
): ToolResult<unknown> {
  const content = Array.isArray(result.content) ? result.content : [];
  const texts = content.flatMap((block) => (block.type === 'text' ? [block.text] : []));
  if (result.isError === true) {
    const text = texts.join('\n\n').trim();
    const shown = text.length > MAX_ERROR_TEXT ? `${text.slice(0, MAX_ERROR_TEXT)}…` : text;
    return ToolResult.error(
      new McpToolError(shown === '' ? `the MCP tool "${where.tool}" of "${where.server}" reported an error` : shown, {
        code: 'ERR_TOOL_FAILED',
        server: where.server,
        tool: where.tool,
      }),
    );
  }
  if (result.structuredContent !== undefined && result.structuredContent !== null) {
    return ToolResult.ok(result.structuredContent);
  }
  if (texts.length === content.length) return ToolResult.ok(texts.join('\n\n'));
  return ToolResult.ok(
    content.map((block) => {
      const { _meta: _dropped, ...plain } = block as typeof block & { _meta?: unknown };
      return plain;
    }),
  );
}
