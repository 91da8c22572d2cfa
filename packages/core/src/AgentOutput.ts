import type { z } from 'zod';
import { toJsonSchema } from './internal/toJsonSchema.js';
import type { OutputSpec } from './OutputSpec.js';

/**
 * The name models are given for an agent's structured output: the schema's
 * name in a JSON schema response format, the tool's in a final-answer tool.
 * An agent with `output` cannot have a tool of this name.
 *
 * @example
 * ```ts
 * const answered = (call: ModelToolCall) => call.name === OUTPUT_NAME
 * ```
 */
export const OUTPUT_NAME = 'final_answer';

/**
 * Default: answers that do not match an agent's `output` schema that go back
 * to the model (with what was wrong) before the run fails.
 *
 * @example
 * ```ts
 * const a = defineAgent({ name: 'extractor', instructions: 'Extract.', model, output: z.object({ city: z.string() }) })
 * a.output?.retries === DEFAULT_OUTPUT_RETRIES // true
 * ```
 */
export const DEFAULT_OUTPUT_RETRIES = 2;

/**
 * An agent's structured output, as {@link defineAgent} keeps it: the zod
 * schema its final answer is checked against (what it returns is the
 * reply's `output`), the spec a model is asked for, and how many answers
 * that do not match go back to the model.
 *
 * @example
 * ```ts
 * const a = defineAgent({ name: 'extractor', instructions: 'Extract the city.', model, output: z.object({ city: z.string() }) })
 * const output: AgentOutput<{ city: string }> | undefined = a.output
 * console.log(output?.spec.name, output?.retries) // 'final_answer' 2
 * ```
 */
export interface AgentOutput<O = unknown> {
  readonly schema: z.ZodType<O>;
  /** What models are asked for (JSON Schema computed once, on first use). */
  readonly spec: OutputSpec;
  /** Answers that fail the schema that go back to the model before the run fails with `ERR_OUTPUT_INVALID`. */
  readonly retries: number;
}

/** An agent's structured output from its definition (already checked). */
export function agentOutput<O>(schema: z.ZodType<O>, retries: number): AgentOutput<O> {
  let spec: OutputSpec | undefined;
  return Object.freeze({
    schema,
    retries,
    get spec(): OutputSpec {
      // What a model writes is what the schema reads: its input side.
      spec ??= Object.freeze({ name: OUTPUT_NAME, schema: Object.freeze(toJsonSchema(schema, 'input')) });
      return spec;
    },
  });
}
