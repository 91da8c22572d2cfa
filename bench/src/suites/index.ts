import type { Suite } from '../Suite.js';
import { cancelSuite } from './cancel.js';
import { coreSuite } from './core.js';
import { scopeSuite } from './scope.js';

/** Every suite `pnpm bench` knows, in the order a full run takes them. */
export const suites: readonly Suite[] = [coreSuite, cancelSuite, scopeSuite];

/** Find a suite by name. */
export function findSuite(name: string): Suite | undefined {
  return suites.find((s) => s.name === name);
}
