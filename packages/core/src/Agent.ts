import type { Model } from './Model.js';
import type { AnyTool } from './Tool.js';
import { InvalidArgumentError } from './TroupeError.js';

const AGENT = Symbol.for('troupe.agent');

/** Default turn limit of an agent's loop. */
export const DEFAULT_MAX_TURNS = 16;

/** What you pass to {@link defineAgent}. */
export interface AgentDefinition {
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
  readonly model: Model;
  readonly tools?: readonly AnyTool[];
  /** Agents this one may delegate to with its built-in `task` tool. */
  readonly subagents?: readonly Agent[];
  /**
   * Names of subagents whose metadata changes flow back into this agent's
   * metadata (through the one reducer) when their task is done. By default a
   * child's changes stay in the child.
   */
  readonly mergeMetadataFrom?: readonly string[];
  /** Turn limit; past it the run ends `incomplete`. Default 16. */
  readonly maxTurns?: number;
}

/** A defined agent. Export it from a module so workers can import it. */
export interface Agent {
  readonly [AGENT]: true;
  readonly name: string;
  readonly description: string;
  readonly module: string | undefined;
  readonly instructions: string;
  readonly model: Model;
  readonly tools: readonly AnyTool[];
  readonly subagents: readonly Agent[];
  readonly mergeMetadataFrom: ReadonlySet<string>;
  readonly maxTurns: number;
}

const NAME = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * Define an agent once, in a module, and export it. The supervisor names
 * agents by module URL; a worker imports each module once and caches it.
 *
 * @example
 * ```ts
 * export const researcher = defineAgent({
 *   name: 'researcher',
 *   module: import.meta.url,
 *   instructions: 'Find facts.',
 *   model,
 *   tools: [search],
 * })
 * ```
 */
export function defineAgent(definition: AgentDefinition): Agent {
  const where = `defineAgent(${JSON.stringify(definition?.name)})`;
  if (typeof definition !== 'object' || definition === null)
    throw new InvalidArgumentError('defineAgent: pass a definition object');
  if (typeof definition.name !== 'string' || !NAME.test(definition.name)) {
    throw new InvalidArgumentError(`${where}: name must match ${NAME}`);
  }
  if (typeof definition.instructions !== 'string')
    throw new InvalidArgumentError(`${where}: instructions must be a string`);
  if (typeof definition.model?.generate !== 'function') {
    throw new InvalidArgumentError(`${where}: model must implement generate({ messages, tools, signal })`);
  }
  if (definition.module !== undefined) {
    try {
      new URL(definition.module);
    } catch {
      throw new InvalidArgumentError(`${where}: module must be a URL; pass import.meta.url`);
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
  return Object.freeze({
    [AGENT]: true as const,
    name: definition.name,
    description: definition.description ?? '',
    module: definition.module,
    instructions: definition.instructions,
    model: definition.model,
    tools: Object.freeze(tools),
    subagents: Object.freeze(subagents),
    mergeMetadataFrom,
    maxTurns,
  });
}

/** True for a value made with {@link defineAgent} (by brand, so it holds across module copies). */
export function isAgent(value: unknown): value is Agent {
  return typeof value === 'object' && value !== null && (value as { [AGENT]?: unknown })[AGENT] === true;
}

/** Find the agent named `name` among a module's exports. */
export function findAgentExport(moduleExports: Record<string, unknown>, name: string): Agent | undefined {
  for (const value of Object.values(moduleExports)) {
    if (isAgent(value) && value.name === name) return value;
  }
  return undefined;
}
