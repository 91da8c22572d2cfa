import type { Suite } from '../Suite.js';
import { abSuite } from './ab.js';
import { cancelSuite } from './cancel.js';
import { coreSuite } from './core.js';
import { distributedSuite } from './distributed.js';
import { hostSuite } from './host.js';
import { hostileSuite } from './hostile.js';
import { mcpSuite } from './mcp.js';
import { modelsSuite } from './models.js';
import { otelSuite } from './otel.js';
import { peersSuite } from './peers.js';
import { persistenceSuite } from './persistence.js';
import { scopeSuite } from './scope.js';
import { subagentSuite } from './subagent.js';
import { supervisorSuite } from './supervisor.js';

/** Every suite `pnpm bench` knows, in the order a full run takes them. */
export const suites: readonly Suite[] = [
  coreSuite,
  cancelSuite,
  hostSuite,
  hostileSuite,
  subagentSuite,
  supervisorSuite,
  persistenceSuite,
  scopeSuite,
  abSuite,
  modelsSuite,
  mcpSuite,
  otelSuite,
  peersSuite,
  distributedSuite,
];

/** Find a suite by name. */
export function findSuite(name: string): Suite | undefined {
  return suites.find((s) => s.name === name);
}
