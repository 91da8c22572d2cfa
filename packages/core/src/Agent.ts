import type { z } from 'zod';
import { type AgentOutput, agentOutput, DEFAULT_OUTPUT_RETRIES, OUTPUT_NAME } from './AgentOutput.js';
import { describeValue } from './internal/describeValue.js';
import { FactoryModel } from './internal/FactoryModel.js';
import type { Model } from './Model.js';
import type { ModelFactory } from './ModelFactory.js';
import type { AnyTool, Tool } from './Tool.js';
import { InvalidArgumentError } from './TroupeError.js';

const AGENT = Symbol.for('troupe.agent');

/**
 * Default turn limit of an agent's loop.
 *
 * Used when a definition gives no `maxTurns`; a run past it ends `incomplete`.
 *
 * @example
 * ```ts
 * const a = defineAgent({ name: 'helper', instructions: 'Help.', model })
 * a.maxTurns === DEFAULT_MAX_TURNS // true
 * ```
 */
export const DEFAULT_MAX_TURNS = 16;

/**
 * What you pass to {@link defineAgent}. `T` and `U` are its tools and
 * subagents, as given: the agent's scope and `toolContext` types are what
 * they read (see {@link Agent}). `Out` is its `output` schema, if it has one.
 *
 * @example
 * ```ts
 * const definition = {
 *   name: 'researcher',
 *   module: import.meta.url,
 *   instructions: 'Find facts.',
 *   model,
 *   maxTurns: 8,
 * } satisfies AgentDefinition
 * const researcher = defineAgent(definition)
 * ```
 */
export interface AgentDefinition<
  T extends readonly AnyTool[] = readonly AnyTool[],
  U extends readonly Agent[] = readonly Agent[],
  Out extends z.ZodType | undefined = z.ZodType | undefined,
> {
  /** Unique within its module; names the agent to parents and in events. `[A-Za-z0-9_-]{1,64}`. */
  readonly name: string;
  /** What the agent is for; a parent's model sees it when choosing a subagent. */
  readonly description?: string;
  /**
   * The URL of the module that exports this agent: pass `import.meta.url`.
   * Required for an agent to run as a subagent, because only the module URL
   * crosses to the worker thread, never the agent's functions.
   */
  readonly module?: string;
  /** The system prompt. */
  readonly instructions: string;
  /**
   * The model, or a {@link ModelFactory} that makes it on the thread that
   * runs the agent, at its first use there (with that thread's environment
   * as it is then; kept for later runs on that thread). Use a factory when
   * the model needs what is known only after start-up — a port, a key —
   * rather than what the environment holds when the module is imported.
   */
  readonly model: Model | ModelFactory;
  readonly tools?: T;
  /** Agents this one may delegate to with its built-in `task` tool (they get its scope and toolContext). */
  readonly subagents?: U;
  /**
   * Names of subagents whose metadata changes flow back into this agent's
   * metadata (through the one reducer) when their task is done. By default a
   * child's changes stay in the child.
   */
  readonly mergeMetadataFrom?: readonly string[];
  /** Turn limit; past it the run ends `incomplete`. Default 16. */
  readonly maxTurns?: number;
  /**
   * Structured output: a zod schema the final answer must match, as JSON.
   * Models are asked for it (`ModelRequest.output`); the loop parses the
   * answer and checks it, and what the schema returns is the reply's
   * `output` (typed from the schema), saved with the run. Keep its root an
   * object (OpenAI requires it) and its result plain JSON (no transforms to
   * dates or classes: it crosses threads and is saved as JSON).
   */
  readonly output?: Out;
  /**
   * Answers that do not match `output` that go back to the model, with what
   * was wrong, before the run fails with `ERR_OUTPUT_INVALID`. Default 2.
   */
  readonly outputRetries?: number;
}

/**
 * A defined agent. Export it from a module so workers can import it.
 *
 * `S` and `TC` are the scope and the `toolContext` shape it needs: all that
 * its tools and subagents read (their {@link ToolContext} types, intersected).
 * A supervisor checks both when it starts or spawns the agent. `O` is what
 * its replies' `output` holds: the result of its `output` schema (`undefined`
 * when it has none). A bare `Agent` is an agent of any scope, tool context
 * and output. To hold an agent to a declared shape, annotate it: `export const orders: Agent<OrderScope, OrderToolContext> = defineAgent(...)`
 * compiles only if its tools read no more than that.
 *
 * @example
 * ```ts
 * const helper: Agent = defineAgent({ name: 'helper', instructions: 'Help.', model })
 * helper.maxTurns // 16 unless the definition sets it
 * ```
 */
// biome-ignore lint/suspicious/noExplicitAny: a bare `Agent` holds agents of every scope, tool context and output.
export interface Agent<S = any, TC extends object = any, O = any> {
  readonly [AGENT]: true;
  readonly name: string;
  readonly description: string;
  readonly module: string | undefined;
  readonly instructions: string;
  /** Its model (for a definition with a model factory: the model that factory makes on this thread, at its first use). */
  readonly model: Model;
  // biome-ignore lint/suspicious/noExplicitAny: tools of every argument and result type; only S and TC are checked.
  readonly tools: readonly Tool<any, any, S, TC>[];
  readonly subagents: readonly Agent<S, TC>[];
  readonly mergeMetadataFrom: ReadonlySet<string>;
  readonly maxTurns: number;
  /** Its structured output, when the definition gives an `output` schema. */
  readonly output: AgentOutput<O> | undefined;
}

/**
 * What the replies of an agent hold in `output`: the result of its `output`
 * schema, `undefined` for an agent without one.
 *
 * @example
 * ```ts
 * const extractor = defineAgent({ name: 'extractor', instructions: 'Extract.', model, output: z.object({ city: z.string() }) })
 * const city = (output: OutputOf<typeof extractor>): string => output.city
 * ```
 */
// biome-ignore lint/suspicious/noExplicitAny: any scope and tool context.
export type OutputOf<A extends Agent> = A extends Agent<any, any, infer O> ? O : unknown;

// What a list of tools and subagents reads, as one intersection: a union of
// what each reads, turned into the parameter of a function (a contravariant
// position, where inference intersects). A tool that declares nothing reads
// `unknown` and no keys, which add nothing to the intersection.
type ReadsOf<X> =
  // biome-ignore lint/suspicious/noExplicitAny: a tool of any argument and result type.
  X extends Tool<any, any, infer S, infer TC>
    ? { scope: S; toolContext: TC }
    : X extends Agent<infer S, infer TC>
      ? { scope: S; toolContext: TC }
      : never;
type Intersected<R> = (R extends unknown ? (reads: R) => void : never) extends (reads: infer I) => void ? I : never;
type Reads<T extends readonly AnyTool[], U extends readonly Agent[]> = Intersected<
  ReadsOf<T[number]> | ReadsOf<U[number]> | { scope: unknown; toolContext: Record<never, never> }
>;
/** The scope an agent with these tools and subagents needs. */
type ScopeNeeded<T extends readonly AnyTool[], U extends readonly Agent[]> =
  Reads<T, U> extends { scope: infer S } ? S : unknown;
/** The `toolContext` an agent with these tools and subagents needs. */
type ToolContextNeeded<T extends readonly AnyTool[], U extends readonly Agent[]> =
  Reads<T, U> extends { toolContext: infer TC extends object } ? TC : Record<never, never>;
/** What an agent with this `output` schema replies with in `output`. */
type OutputFrom<Out> = Out extends z.ZodType ? z.output<Out> : undefined;

const NAME = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * Define an agent once, in a module, and export it. The supervisor names
 * agents by module URL; a worker imports each module once and caches it.
 *
 * The agent's type says what it needs: the scope and the `toolContext` keys
 * that its tools and subagents read (their {@link ToolContext} types), so a
 * supervisor can refuse at compile time to start it without them.
 *
 * @example
 * ```ts
 * const search = defineTool({
 *   name: 'search',
 *   description: 'Search the knowledge base',
 *   parameters: z.object({ query: z.string() }),
 *   execute: async ({ query }, ctx) => (await fetch(`https://kb.example/?q=${encodeURIComponent(query)}`, { signal: ctx.signal })).json(),
 * })
 * export const researcher = defineAgent({
 *   name: 'researcher',
 *   module: import.meta.url,
 *   instructions: 'Find facts.',
 *   model,
 *   tools: [search],
 * })
 * ```
 */
export function defineAgent<
  const T extends readonly AnyTool[] = [],
  const U extends readonly Agent[] = [],
  Out extends z.ZodType | undefined = undefined,
>(definition: AgentDefinition<T, U, Out>): Agent<ScopeNeeded<T, U>, ToolContextNeeded<T, U>, OutputFrom<Out>> {
  const where = `defineAgent(${JSON.stringify(definition?.name)})`;
  if (typeof definition !== 'object' || definition === null)
    throw new InvalidArgumentError('defineAgent: pass a definition object');
  if (typeof definition.name !== 'string' || !NAME.test(definition.name)) {
    throw new InvalidArgumentError(`${where}: name must match ${NAME}`);
  }
  if (typeof definition.instructions !== 'string')
    throw new InvalidArgumentError(`${where}: instructions must be a string`);
  const model: unknown = definition.model;
  const factory = typeof model === 'function' && typeof (model as Partial<Model>).generate !== 'function';
  if (!factory && typeof (model as Partial<Model> | null | undefined)?.generate !== 'function') {
    throw new InvalidArgumentError(
      `${where}: model must implement generate({ messages, tools, signal }), or be a function that returns such a model (a model factory, called on the thread that runs the agent), got ${describeValue(model)}`,
    );
  }
  if (definition.module !== undefined) {
    // Workers import the module from this machine's files: a path is not a URL,
    // and an https: (or data:, node:) URL is not a file a worker can import.
    let scheme: string | undefined;
    try {
      scheme = new URL(definition.module).protocol;
    } catch {
      scheme = undefined;
    }
    if (scheme !== 'file:') {
      throw new InvalidArgumentError(
        `${where}: module must be the file: URL of the module that defines the agent, got ${JSON.stringify(definition.module)}${scheme !== undefined ? ` (a ${scheme} URL)` : typeof definition.module === 'string' ? ' (a path, not a URL)' : ''}; pass import.meta.url`,
      );
    }
  }
  for (const key of ['tools', 'subagents', 'mergeMetadataFrom'] as const) {
    const list: unknown = definition[key];
    if (list !== undefined && !Array.isArray(list)) {
      throw new InvalidArgumentError(`${where}: ${key} must be an array, got ${describeValue(list)}`);
    }
  }
  const tools = [...(definition.tools ?? [])];
  const names = new Set<string>();
  for (const tool of tools) {
    if (typeof tool?.execute !== 'function')
      throw new InvalidArgumentError(`${where}: tools must be made with defineTool`);
    if (names.has(tool.name)) throw new InvalidArgumentError(`${where}: two tools are named "${tool.name}"`);
    names.add(tool.name);
  }
  const subagents = [...(definition.subagents ?? [])];
  for (const sub of subagents) {
    if (!isAgent(sub)) throw new InvalidArgumentError(`${where}: subagents must be made with defineAgent`);
    if (sub.module === undefined) {
      throw new InvalidArgumentError(
        `${where}: subagent "${sub.name}" has no module URL; define it with module: import.meta.url so a worker can load it`,
      );
    }
  }
  if (subagents.length > 0 && names.has('task')) {
    throw new InvalidArgumentError(
      `${where}: "task" is the built-in delegation tool of an agent with subagents; rename your tool`,
    );
  }
  const mergeMetadataFrom = new Set(definition.mergeMetadataFrom ?? []);
  for (const name of mergeMetadataFrom) {
    if (!subagents.some((s) => s.name === name)) {
      throw new InvalidArgumentError(`${where}: mergeMetadataFrom names "${name}", which is not one of its subagents`);
    }
  }
  const maxTurns = definition.maxTurns ?? DEFAULT_MAX_TURNS;
  if (!Number.isSafeInteger(maxTurns) || maxTurns < 1)
    throw new InvalidArgumentError(`${where}: maxTurns must be a positive integer`);
  const schema: unknown = definition.output;
  if (schema !== undefined && typeof (schema as { safeParse?: unknown } | null)?.safeParse !== 'function') {
    throw new InvalidArgumentError(`${where}: output must be a zod schema, e.g. z.object({ ... })`);
  }
  const outputRetries = definition.outputRetries ?? DEFAULT_OUTPUT_RETRIES;
  if (!Number.isSafeInteger(outputRetries) || outputRetries < 0 || outputRetries > 100) {
    throw new InvalidArgumentError(
      `${where}: outputRetries must be an integer from 0 to 100, got ${describeValue(outputRetries)}`,
    );
  }
  if (schema !== undefined && names.has(OUTPUT_NAME)) {
    throw new InvalidArgumentError(
      `${where}: "${OUTPUT_NAME}" is the name a model may give an agent's structured output (a final-answer tool); rename your tool`,
    );
  }
  return Object.freeze({
    [AGENT]: true as const,
    name: definition.name,
    description: definition.description ?? '',
    module: definition.module,
    instructions: definition.instructions,
    model: factory ? new FactoryModel(definition.name, model as ModelFactory) : (model as Model),
    tools: Object.freeze(tools),
    subagents: Object.freeze(subagents),
    mergeMetadataFrom,
    maxTurns,
    output: schema === undefined ? undefined : agentOutput(schema as z.ZodType<OutputFrom<Out>>, outputRetries),
  });
}

/**
 * True for a value made with {@link defineAgent} (by brand, so it holds across module copies).
 *
 * @example
 * ```ts
 * const values: unknown[] = [defineAgent({ name: 'helper', instructions: 'Help.', model }), { name: 'helper' }]
 * const agents = values.filter(isAgent) // only the first
 * ```
 */
export function isAgent(value: unknown): value is Agent {
  return typeof value === 'object' && value !== null && (value as { [AGENT]?: unknown })[AGENT] === true;
}

/**
 * Find the agent named `name` among a module's exports.
 *
 * Matches by the agent's `name`, not the export's name; the first match wins.
 * `undefined` when no export is an agent of that name.
 *
 * @example
 * ```ts
 * const agentModule = { researcher: defineAgent({ name: 'researcher', instructions: 'Find facts.', model }) }
 * findAgentExport(agentModule, 'researcher') // the researcher agent
 * findAgentExport(agentModule, 'writer')     // undefined
 * ```
 */
export function findAgentExport(moduleExports: Record<string, unknown>, name: string): Agent | undefined {
  for (const value of Object.values(moduleExports)) {
    if (isAgent(value) && value.name === name) return value;
  }
  return undefined;
}
