import { type Agent, TroupeError } from '@troupe/core';
import { findAgentExport } from '@troupe/core/internal';

// One import per module per worker; the promise is cached so concurrent
// first uses share it. A failed import is not cached, so a fixed file loads.
const modules = new Map<string, Promise<Record<string, unknown>>>();
// Agents already found, by module then name: the hot path of every run is two lookups.
const agents = new Map<string, Map<string, Agent>>();

/**
 * The agent if this thread has loaded it already, else `undefined` (then call {@link loadAgent}).
 *
 * @example
 * ```ts
 * const url = new URL('./agents/helper.js', import.meta.url).href
 * const helper = loadedAgent(url, 'helper') ?? (await loadAgent(url, 'helper'))
 * ```
 */
export function loadedAgent(module: string, name: string): Agent | undefined {
  return agents.get(module)?.get(name);
}

/**
 * Import `module` (a URL) once per thread and return the agent named `name`
 * among its exports. Throws `ERR_UNKNOWN_AGENT` when the module cannot be
 * imported or exports no such agent.
 *
 * The worker calls it for each task; call it yourself to check, before
 * spawning, that an agent's `module` URL really exports it.
 *
 * @example
 * ```ts
 * const helper = await loadAgent(new URL('./agents/helper.js', import.meta.url).href, 'helper')
 * ```
 */
export async function loadAgent(module: string, name: string): Promise<Agent> {
  let loading = modules.get(module);
  if (loading === undefined) {
    loading = import(module) as Promise<Record<string, unknown>>;
    modules.set(module, loading);
    loading.catch(() => modules.delete(module));
  }
  let exports: Record<string, unknown>;
  try {
    exports = await loading;
  } catch (error) {
    throw new TroupeError(
      `cannot import agent module ${module}: ${error instanceof Error ? error.message : String(error)}; pass the URL of a built JavaScript module (import.meta.url of the file that defines the agent)`,
      { code: 'ERR_UNKNOWN_AGENT', cause: error },
    );
  }
  const agent = findAgentExport(exports, name);
  if (agent !== undefined) {
    let byName = agents.get(module);
    if (byName === undefined) {
      byName = new Map();
      agents.set(module, byName);
    }
    byName.set(name, agent);
  }
  if (agent === undefined) {
    throw new TroupeError(
      `module ${module} exports no agent named "${name}"; export the value returned by defineAgent({ name: "${name}", ... })`,
      { code: 'ERR_UNKNOWN_AGENT' },
    );
  }
  return agent;
}
