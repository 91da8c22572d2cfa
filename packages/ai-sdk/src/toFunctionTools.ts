import type { JSONSchema7, LanguageModelV4FunctionTool } from '@ai-sdk/provider';
import type { ToolSpec } from '@troupe/core';

/**
 * Troupe tool specs as the AI SDK's function tools: `inputSchema` is the JSON
 * Schema zod made from the tool's parameters (`ToolSpec.parameters`) without
 * its `$schema` marker, which some providers refuse. The provider package
 * turns these into its own wire format (Anthropic's `input_schema`,
 * Gemini's `functionDeclarations`, ...).
 *
 * @example
 * ```ts
 * import { defineTool } from '@troupe/core'
 *
 * const weather = defineTool({ name: 'weather', description: 'Current weather', parameters: z.object({ city: z.string() }), execute: () => 4 })
 * toFunctionTools([weather.spec])
 * // [{ type: 'function', name: 'weather', description: 'Current weather', inputSchema: { type: 'object', ... } }]
 * ```
 */
export function toFunctionTools(tools: readonly ToolSpec[]): LanguageModelV4FunctionTool[] {
  return tools.map((t) => {
    const { $schema: _dialect, ...inputSchema } = t.parameters;
    return {
      type: 'function' as const,
      name: t.name,
      description: t.description,
      inputSchema: inputSchema as JSONSchema7,
    };
  });
}
