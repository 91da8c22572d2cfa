/**
 * The description of a tool a model sees.
 *
 * What a {@link Model} gets in `ModelRequest.tools`; an adapter turns it into
 * its provider's tool format.
 *
 * @example
 * ```ts
 * const spec: ToolSpec = {
 *   name: 'get_weather',
 *   description: 'Current weather of a city',
 *   parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
 * }
 * ```
 */
export interface ToolSpec {
  readonly name: string;
  readonly description: string;
  /** JSON Schema of the arguments, derived from the zod schema. */
  readonly parameters: Readonly<Record<string, unknown>>;
}
