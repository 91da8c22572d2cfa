import type { ToolSpec } from '@troupe/core';
import type { ChatCompletionFunctionTool } from 'openai/resources/chat/completions';
import { toStrictSchema, withoutDialect } from './internal/strictSchema.js';

/**
 * Troupe tool specs as chat-completions `tools`. `parameters` is the JSON
 * Schema zod's own converter made (`ToolSpec.parameters`), without its
 * `$schema` marker. With `strict`, each function is sent with `strict: true`
 * and a schema strict mode accepts: every property required, optional ones
 * made nullable (the model's `null` for them is dropped again before the
 * tool's schema checks the arguments), no extra properties.
 *
 * @example
 * ```ts
 * import { defineTool } from '@troupe/core'
 *
 * const weather = defineTool({ name: 'weather', description: 'Current weather', parameters: z.object({ city: z.string() }), execute: () => 4 })
 * toChatTools([weather.spec], { strict: true })
 * // [{ type: 'function', function: { name: 'weather', description, parameters, strict: true } }]
 * ```
 */
export function toChatTools(
  tools: readonly ToolSpec[],
  options: { readonly strict?: boolean } = {},
): ChatCompletionFunctionTool[] {
  return tools.map((t) => ({
    type: 'function' as const,
    function: {
      name: t.name,
      description: t.description,
      parameters: options.strict === true ? toStrictSchema(t.parameters) : withoutDialect(t.parameters),
      ...(options.strict === true ? { strict: true } : {}),
    },
  }));
}
