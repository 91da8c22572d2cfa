import type { Agent } from '../Agent.js';
import { TASK_TOOL_NAME } from '../TaskTool.js';
import type { AnyTool } from '../Tool.js';
import type { ToolSpec } from '../ToolSpec.js';

/** An agent's tools by name, their positions and their specs. */
export interface ToolIndex {
  readonly byName: ReadonlyMap<string, AnyTool>;
  /** Position in `agent.tools`; the task tool is `agent.tools.length`. */
  readonly position: ReadonlyMap<string, number>;
  readonly specs: readonly ToolSpec[];
  specsWithTask(task: AnyTool): readonly ToolSpec[];
}

// An agent's tools never change: index them once per agent, not once per run.
const toolIndexes = new WeakMap<Agent, ToolIndex>();

/** The tool index of an agent, built on its first run. */
export function toolIndexOf(agent: Agent): ToolIndex {
  let index = toolIndexes.get(agent);
  if (index === undefined) {
    const byName = new Map<string, AnyTool>();
    const position = new Map<string, number>();
    agent.tools.forEach((tool, i) => {
      byName.set(tool.name, tool);
      position.set(tool.name, i);
    });
    position.set(TASK_TOOL_NAME, agent.tools.length);
    let specs: readonly ToolSpec[] | undefined;
    let withTask: readonly ToolSpec[] | undefined;
    const own = (): readonly ToolSpec[] => {
      specs ??= Object.freeze(agent.tools.map((t) => t.spec));
      return specs;
    };
    index = {
      byName,
      position,
      get specs() {
        return own();
      },
      // The task tool's spec depends only on the agent's subagents: the same for every run.
      specsWithTask(task) {
        withTask ??= Object.freeze([...own(), task.spec]);
        return withTask;
      },
    };
    toolIndexes.set(agent, index);
  }
  return index;
}
