import { type Agent, InvalidArgumentError, isTroupeError } from '@troupe/core';
import { loadAgent, loadedAgent } from '@troupe/subagent';
import { isEntryModule } from './entryModule.js';

// An agent's subagents by name, indexed once per agent.
const subagentIndex = new WeakMap<Agent, ReadonlyMap<string, Agent>>();

/** The subagent `name` that `agent` declares, if it does. */
export function subagentNamed(agent: Agent, name: string): Agent | undefined {
  let index = subagentIndex.get(agent);
  if (index === undefined) {
    index = new Map(agent.subagents.map((a) => [a.name, a]));
    subagentIndex.set(agent, index);
  }
  return index.get(name);
}

/**
 * The definition of a saved run's agent: `name` among `parent`'s subagents,
 * as its own module exports it; `undefined` when the parent has none by that name.
 */
export async function restoredDefinition(parent: Agent, name: string): Promise<Agent | undefined> {
  const declared = subagentNamed(parent, name);
  return declared === undefined ? undefined : definitionOf(declared);
}

/**
 * An agent's definition as its own module exports it (its declared subagents matter for nested
 * tasks): at once when this thread has loaded it, else once its module is imported. An agent of
 * the entry script is taken as given: that module is this program, still running (see
 * isEntryModule). Throws at once without a module.
 */
export function definitionOf(agent: Agent): Agent | Promise<Agent> {
  if (agent.module === undefined) {
    throw new InvalidArgumentError(
      `agent "${agent.name}" has no module URL, so a worker cannot load it: define it with module: import.meta.url`,
      { code: 'ERR_UNKNOWN_AGENT' },
    );
  }
  const loaded = loadedAgent(agent.module, agent.name);
  if (loaded !== undefined) return loaded;
  return isEntryModule(agent.module) ? agent : importDefinition(agent.module, agent.name);
}

async function importDefinition(module: string, name: string): Promise<Agent> {
  try {
    return await loadAgent(module, name);
  } catch (error) {
    if (isTroupeError(error))
      throw new InvalidArgumentError(error.message, { code: 'ERR_UNKNOWN_AGENT', cause: error });
    throw error;
  }
}
