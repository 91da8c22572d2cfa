import { z } from 'zod';

/**
 * The JSON Schema of a zod schema, as a model is shown it: of what the
 * schema reads (`io: 'input'`, what a model writes for it to parse) or of
 * what it returns (`'output'`). A type JSON Schema cannot say (a function, a
 * transform's result) is left open; a schema zod cannot convert at all is
 * `{ type: 'object' }`.
 */
export function toJsonSchema(schema: z.ZodType, io: 'input' | 'output' = 'output'): Record<string, unknown> {
  try {
    return z.toJSONSchema(schema, { unrepresentable: 'any', io }) as Record<string, unknown>;
  } catch {
    return { type: 'object' };
  }
}
