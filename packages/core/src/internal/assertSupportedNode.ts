// Imported first by the package's index, so `import '@troupe/core'` on a Node
// outside the supported range fails at once with the range, instead of later
// with an error about a missing API. npm and pnpm only warn about `engines`
// when a dependency is installed, so this is where an unsupported Node is
// stopped for the published packages (the workspace is stopped at install by
// `devEngines`).
import { TroupeError } from '../TroupeError.js';

/**
 * The Node.js versions Troupe supports, as in every package's `engines.node`
 * (a test holds them equal): the two LTS lines from the first release that
 * loads ES modules from `require()` without a flag, and every release from 24 on.
 */
export const SUPPORTED_NODE_RANGE = '^20.19.0 || ^22.12.0 || >=24.0.0';

// [major, lowest minor, whether later majors are in too], one per `||` term above.
const FLOORS: readonly (readonly [number, number, boolean])[] = [
  [20, 19, false],
  [22, 12, false],
  [24, 0, true],
];

/** True when `version` (`20.19.0` or `v20.19.0`; pre-releases count as their release) is in {@link SUPPORTED_NODE_RANGE}. */
export function isSupportedNode(version: string): boolean {
  const match = /^v?(\d+)\.(\d+)\.\d+/.exec(version);
  if (match === null) return false;
  const major = Number(match[1]);
  const minor = Number(match[2]);
  return FLOORS.some(([floorMajor, floorMinor, later]) =>
    major === floorMajor ? minor >= floorMinor : later && major > floorMajor,
  );
}

/** Throws `ERR_UNSUPPORTED_NODE`, naming the supported range, unless `version` is in it. */
export function assertSupportedNode(version: string): void {
  if (isSupportedNode(version)) return;
  throw new TroupeError(
    `Troupe supports Node.js ${SUPPORTED_NODE_RANGE}; this is Node.js ${version}: run it with a supported Node.js (22 or 24 LTS)`,
    { code: 'ERR_UNSUPPORTED_NODE' },
  );
}

assertSupportedNode(process.versions.node);
