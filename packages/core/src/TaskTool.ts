import { z } from 'zod';
import type { Agent } from './Agent.js';
import { ContextUpdate, type Metadata, type Operation, type SessionEvent } from './ContextUpdate.js';
import type { ToolCallId } from './Id.js';
import type { Request } from './Request.js';
import { type AnyTool, defineTool, type Tool, type ToolSpec } from './Tool.js';
import type { ToolContext } from './ToolContext.js';
import { ToolResult } from './ToolResult.js';
import type { Usage } from './Usage.js';

/**
 * The name of the built-in delegation tool.
 *
 * An agent with `subagents` gets a tool of this name; do not define a tool of
 * your own with it.
 *
 * @example
 * ```ts
 * supervisor.on('tool.execute.start', (e) => {
 *   if (e.toolName === TASK_TOOL_NAME) console.log(`${e.agentId} delegates`)
 * })
 * ```
 */
export const TASK_TOOL_NAME = 'task';

/**
 * The kind of the request a `task` call's spawner answers with when it defers
 * the call (a worker parent gives its thread up while its child runs): no
 * person is asked, and the call is not reported as pending — its stop is
 * reported by the supervisor when the child ends.
 */
export const DEFERRED_TASK_KIND = 'deferred';

/**
 * What the `task` tool asks its spawner to do.
 *
 * Made by the runtime for each `task` call; a host sees the spawned run as
 * `subagent.*` events, not as this object.
 *
 * @example
 * ```ts
 * declare const subagent: Agent
 * const request: TaskRequest = {
 *   subagent,
 *   instructions: 'Find the three latest incidents',
 *   toolCallId: createId('call'),
 *   metadata: {},
 *   signal: AbortSignal.timeout(60_000),
 * }
 * ```
 */
export interface TaskRequest {
  readonly subagent: Agent;
  readonly instructions: string;
  /** The parent's tool call: names the child for as long as it lives (a suspended child is re-attached by it). */
  readonly toolCallId: ToolCallId;
  /** The parent's metadata when it made the call: the child starts from this snapshot. */
  readonly metadata: Metadata;
  /** Aborts when the parent's call is cancelled. */
  readonly signal: AbortSignal;
}

/**
 * How a delegated task ended, as the parent's `task` tool sees it. `O` is
 * the child's structured output (see `defineAgent`'s `output`); the parent's
 * model is given it as the call's result instead of the text, when there is one.
 *
 * @example
 * ```ts
 * const describe = (result: TaskResult): string =>
 *   result.status === 'done' ? result.result : result.status === 'suspended' ? `waiting on ${result.request.id}` : result.error.message
 * const city = (result: TaskResult<{ city: string }>): string | undefined =>
 *   result.status === 'done' ? result.output?.city : undefined
 * ```
 */
export type TaskResult<O = unknown> =
  | {
      readonly status: 'done';
      readonly result: string;
      /** What the child's `output` schema returned, when the child has one. */
      readonly output?: O | undefined;
      /** The child's metadata operations, present when the spawn asked to merge them back. */
      readonly updates: readonly Operation[] | undefined;
      /** The child's session-log events, with the child's id. */
      readonly events: readonly SessionEvent[];
      /** What the child's subtree used. */
      readonly usage?: Usage | undefined;
    }
  | { readonly status: 'suspended'; readonly request: Request }
  | {
      readonly status: 'error';
      readonly error: Error;
      readonly events: readonly SessionEvent[];
      readonly usage?: Usage | undefined;
    };

/**
 * Runs delegated tasks for a parent's `task` tool. The supervisor implements
 * it: it owns the pool and the cancellation table, so even a subagent's own
 * `task` calls come back to it.
 */
export interface TaskSpawner {
  runTask(request: TaskRequest): Promise<TaskResult>;
}

/**
 * A {@link TaskRequest} whose `signal` is read from the call's context only if
 * the spawner asks for it (a signal costs a cancellation bridge). A class,
 * not a literal with a getter: one is made per delegated task.
 */
class TaskCall implements TaskRequest {
  readonly subagent: Agent;
  readonly instructions: string;
  readonly toolCallId: ToolCallId;
  readonly metadata: Metadata;
  readonly #ctx: ToolContext;
  constructor(subagent: Agent, instructions: string, ctx: ToolContext) {
    this.subagent = subagent;
    this.instructions = instructions;
    this.toolCallId = ctx.toolCallId;
    this.metadata = ctx.state.metadata;
    this.#ctx = ctx;
  }
  get signal(): AbortSignal {
    return this.#ctx.signal;
  }
}

interface TaskShape {
  readonly byName: ReadonlyMap<string, Agent>;
  readonly description: string;
  readonly parameters: TaskParameters;
  /** The spec a model sees, made from a throwaway definition once per subagent list. */
  readonly spec: ToolSpec;
}

type TaskParameters = z.ZodObject<{ subagent: z.ZodEnum<Record<string, string>>; instructions: z.ZodString }>;

// The tool is made per run (it closes over the run's spawner) but its schema,
// description and spec depend only on the subagent list: build those once.
const shapes = new WeakMap<readonly Agent[], TaskShape>();

function shapeOf(subagents: readonly Agent[]): TaskShape {
  let shape = shapes.get(subagents);
  if (shape === undefined) {
    const byName = new Map(subagents.map((a) => [a.name, a]));
    const names = [...byName.keys()] as [string, ...string[]];
    const catalogue = subagents.map((a) => `- ${a.name}${a.description ? `: ${a.description}` : ''}`).join('\n');
    const description = `Delegate a task to a subagent, which works on it alone and returns its answer. Subagents:\n${catalogue}`;
    const parameters: TaskParameters = z.object({
      subagent: z.enum(names).describe('which subagent does the task'),
      instructions: z.string().min(1).describe('what the subagent must do, self-contained'),
    });
    // defineTool validates the definition and derives the JSON Schema: once per list.
    const { spec } = defineTool({ name: TASK_TOOL_NAME, description, parameters, execute: () => undefined });
    shape = { byName, description, parameters, spec };
    shapes.set(subagents, shape);
  }
  return shape;
}

/**
 * One run's `task` tool. A class, not `defineTool`'s frozen literal with a
 * getter: one is made for every run of an agent with subagents, and a
 * getter literal costs a new hidden class each time.
 */
class TaskTool implements Tool<TaskParameters, unknown> {
  readonly name = TASK_TOOL_NAME;
  readonly retries = 0;
  // A subagent run is bounded by its own deadline and the parent's, not by a tool timeout.
  readonly timeoutMs = null;
  readonly requiresApproval = false;
  // A child run is a side effect: never re-run one a crash interrupted.
  readonly idempotent = false;
  readonly #shape: TaskShape;
  readonly execute: Tool<TaskParameters, unknown>['execute'];

  constructor(
    shape: TaskShape,
    spawner: TaskSpawner,
    deliver: (toolCallId: ToolCallId, events: readonly SessionEvent[], usage: Usage | undefined) => void,
  ) {
    this.#shape = shape;
    this.execute = async ({ subagent, instructions }, ctx) => {
      const agent = shape.byName.get(subagent);
      if (agent === undefined) return ToolResult.error(`unknown subagent "${subagent}"`);
      if (ctx.answer !== undefined) {
        // The supervisor resolves a suspended child's call itself; an answer never re-runs it.
        return ToolResult.error(`task call ${ctx.toolCallId} cannot take an answer: its child answers for itself`);
      }
      const outcome = await spawner.runTask(new TaskCall(agent, instructions, ctx));
      // A suspended child's events and usage come with its result, once it has one.
      if (outcome.status !== 'suspended') deliver(ctx.toolCallId, outcome.events, outcome.usage);
      return taskToolResult(outcome);
    };
    Object.freeze(this);
  }

  get description(): string {
    return this.#shape.description;
  }

  get parameters(): TaskParameters {
    return this.#shape.parameters;
  }

  get spec(): ToolSpec {
    return this.#shape.spec;
  }
}

/**
 * A child's result as its parent's `task` call's tool result: the answer (with
 * the child's metadata operations when the parent merges them), the child's
 * error, or the child's question. The one mapping of a {@link TaskResult}: a
 * live call returns it, and a call resumed after its child suspended reads it
 * the way any tool's result is read (`resolvedCall`).
 */
export function taskToolResult(result: TaskResult): ToolResult<unknown> {
  switch (result.status) {
    case 'done':
      return ToolResult.ok(
        taskAnswer(result),
        result.updates === undefined || result.updates.length === 0 ? undefined : ContextUpdate.from(result.updates),
      );
    case 'suspended':
      return ToolResult.pending(result.request);
    case 'error':
      return ToolResult.error(result.error);
  }
}

/** What a parent's model is given for a child's answer: its structured output when it has one, else its text. */
function taskAnswer(done: Extract<TaskResult, { readonly status: 'done' }>): unknown {
  return done.output !== undefined ? done.output : done.result;
}

/**
 * The built-in `task` tool of an agent with subagents: its model names one of
 * the declared subagents and gives instructions. Several task calls in one
 * turn run in parallel; results come back in call order. `deliver` receives
 * the child's session-log events for the parent's log.
 */
export function createTaskTool(
  subagents: readonly Agent[],
  spawner: TaskSpawner,
  deliver: (toolCallId: ToolCallId, events: readonly SessionEvent[], usage: Usage | undefined) => void,
): AnyTool {
  return new TaskTool(shapeOf(subagents), spawner, deliver);
}
