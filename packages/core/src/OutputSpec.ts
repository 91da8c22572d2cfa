/**
 * The structured output a model is asked for: one JSON value that matches
 * `schema`, as its final answer's text.
 *
 * What a {@link Model} gets in `ModelRequest.output` when the agent defines
 * `output`. A model that can hold its answer to a schema does (a JSON schema
 * response format, a final-answer tool); one that cannot ignores it. Either
 * way the agent loop checks the answer against the agent's zod schema and
 * sends a mismatch back to the model.
 *
 * @example
 * ```ts
 * const output: OutputSpec = {
 *   name: 'final_answer',
 *   schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
 * }
 * ```
 */
export interface OutputSpec {
  /** The schema's name, `[A-Za-z0-9_-]` as providers require (`final_answer`). */
  readonly name: string;
  /** JSON Schema of what the model writes, derived from the agent's zod schema. */
  readonly schema: Readonly<Record<string, unknown>>;
}
