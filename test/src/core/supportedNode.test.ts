// The supported Node.js range is written in several places: every package's
// `engines.node`, the workspace's `engines` and `devEngines` (which make
// `pnpm install` refuse another Node), and the check `@troupe/core` runs when
// it is imported. They must say the same, and the check must decide as npm's
// own range matcher does.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { isTroupeError } from '@troupe/core';
import semver from 'semver';
import {
  assertSupportedNode,
  isSupportedNode,
  SUPPORTED_NODE_RANGE,
} from '../../../packages/core/dist/internal/assertSupportedNode.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));

interface Manifest {
  readonly name: string;
  readonly private?: boolean;
  readonly engines?: { readonly node?: string };
  readonly devEngines?: {
    readonly runtime?: { readonly name: string; readonly version: string; readonly onFail: string };
  };
}

/** Packages whose dependencies need a newer Node.js than the workspace's floor (the AI SDK declares Node 22+). */
const NARROWED: Readonly<Record<string, string>> = { '@troupe/ai-sdk': '^22.12.0 || >=24.0.0' };

const readManifest = (dir: string): Manifest => JSON.parse(readFileSync(`${dir}/package.json`, 'utf8')) as Manifest;

describe('the supported Node.js range', () => {
  it('is the engines.node of the workspace and of every package (a package on a dependency that needs more may narrow it)', () => {
    const dirs = readdirSync(`${root}packages`).map((name) => `${root}packages/${name}`);
    assert.ok(dirs.length >= 3);
    for (const dir of [root, ...dirs]) {
      const manifest = readManifest(dir);
      const range = manifest.engines?.node;
      if (range !== undefined && range === NARROWED[manifest.name]) {
        // Within the workspace's range, never past it.
        assert.ok(
          semver.subset(range, SUPPORTED_NODE_RANGE),
          `${manifest.name}: ${range} within ${SUPPORTED_NODE_RANGE}`,
        );
        continue;
      }
      assert.equal(range, SUPPORTED_NODE_RANGE, `${manifest.name}: engines.node`);
    }
  });

  it("is what the workspace's devEngines holds pnpm install to, failing on any other Node", () => {
    assert.deepEqual(readManifest(root).devEngines?.runtime, {
      name: 'node',
      version: SUPPORTED_NODE_RANGE,
      onFail: 'error',
    });
  });

  it('is decided as semver decides it, for every release line and the edges of each floor', () => {
    assert.ok(semver.validRange(SUPPORTED_NODE_RANGE), SUPPORTED_NODE_RANGE);
    const versions: string[] = [];
    for (let major = 14; major <= 30; major++) {
      for (const minor of [0, 1, 11, 12, 13, 18, 19, 20, 40]) {
        for (const patch of [0, 3]) versions.push(`${major}.${minor}.${patch}`);
      }
    }
    for (const version of versions) {
      assert.equal(isSupportedNode(version), semver.satisfies(version, SUPPORTED_NODE_RANGE), version);
      assert.equal(isSupportedNode(`v${version}`), semver.satisfies(version, SUPPORTED_NODE_RANGE), `v${version}`);
    }
  });

  it('holds this Node.js (the one running the tests)', () => {
    assert.ok(isSupportedNode(process.versions.node), process.versions.node);
    assertSupportedNode(process.versions.node);
  });

  for (const version of ['18.20.8', '20.18.3', '21.7.3', '22.11.0', '23.11.1', 'not a version']) {
    it(`refuses ${version} with ERR_UNSUPPORTED_NODE, naming the range`, () => {
      assert.throws(
        () => assertSupportedNode(version),
        (error: unknown) =>
          isTroupeError(error, 'ERR_UNSUPPORTED_NODE') &&
          error.message.includes(SUPPORTED_NODE_RANGE) &&
          error.message.includes(version),
      );
    });
  }
});
