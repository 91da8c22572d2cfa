// Troupe as a user gets it. Every package in packages/ is built clean from its
// sources and packed with `pnpm pack` (which rewrites `workspace:` ranges),
// the tarballs are installed with plain `npm install` into a
// fresh project in the system's temp directory, outside the workspace, and
// that project compiles a small consumer, the README's quick start and every
// package README's examples with `tsc --strict` and `skipLibCheck: false`,
// then runs them: a subagent on a worker thread, from ESM and from CommonJS,
// a conversation kept in SQLite across two supervisors, and a model on an
// OpenAI-compatible server on 127.0.0.1. Nothing is kept between runs but
// npm's download cache.
//
// better-sqlite3 (a dependency of @troupe/sqlite) is native. Its install
// script first looks for a prebuilt binary, then builds from source (about
// 45 s here: its release host is out of reach). The workspace's `pnpm install`
// has just built that same version from source for the Node.js running this
// test, so the test hands that binary to the consumer's install as a local
// prebuild (better-sqlite3's install looks in npm_config_better_sqlite3_local_prebuilds
// before downloading, and loads the binary to check it) instead of compiling
// SQLite a second time. What the consumer installs is otherwise npm's own
// resolution: if it picks another better-sqlite3 version, or the binary does
// not load, the name does not match or the check fails and npm builds from
// source as a user's install would; the test says which happened.
//
// The packing runs on a copy of the workspace's packages (their sources,
// manifests and built code; node_modules linked, not copied), packed with
// --ignore-scripts: packages/*/dist is the code every other test file imports
// while this one runs beside them. Each package's `prepack` (a test holds it to
// this) empties its dist and runs `tsc -b`: a build from the sources alone.
// `pnpm test` has just built the same sources with the same compiler, so the
// copy takes that build as a clean one would leave it: without its build info
// and without any file whose source is gone (renamed or deleted since an
// earlier build). Building the copy again took 24 s of CPU; ten prepacks, 52.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createRequire, isBuiltin } from 'node:module';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, posix, relative, sep } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import semver from 'semver';
import ts from 'typescript';

const root = fileURLToPath(new URL('../../../', import.meta.url));

interface Manifest {
  readonly name: string;
  readonly version: string;
  readonly private?: boolean;
  readonly description?: string;
  readonly keywords?: readonly string[];
  readonly license?: string;
  readonly repository?: { readonly type?: string; readonly url?: string; readonly directory?: string };
  readonly type?: string;
  readonly engines?: { readonly node?: string };
  readonly sideEffects?: boolean | readonly string[];
  readonly main?: string;
  readonly types?: string;
  readonly exports?: Readonly<Record<string, string | Readonly<Record<string, string>>>>;
  readonly files?: readonly string[];
  readonly scripts?: Readonly<Record<string, string>>;
  readonly dependencies?: Readonly<Record<string, string>>;
  readonly peerDependencies?: Readonly<Record<string, string>>;
  readonly optionalDependencies?: Readonly<Record<string, string>>;
  readonly devDependencies?: Readonly<Record<string, string>>;
}

const readJson = <T>(path: string): T => JSON.parse(readFileSync(path, 'utf8')) as T;

/** A package as packed: its workspace directory, its manifest and files as they are in the tarball. */
interface Packed {
  readonly dir: string;
  readonly tarball: string;
  readonly unpacked: string;
  readonly manifest: Manifest;
  readonly files: ReadonlySet<string>;
}

interface Ran {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

// Child processes see neither the workspace's package-manager settings (pnpm
// test exports npm_* variables) nor the test runner's, and run on the Node.js
// that runs the tests. npm_config_nodedir is kept: it names the headers native
// builds compile against.
function childEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    const lower = key.toLowerCase();
    if (lower !== 'npm_config_nodedir' && /^(npm_|pnpm_|turbo_|node_test_|init_cwd$)/.test(lower)) continue;
    env[key] = value;
  }
  env.PATH = `${dirname(process.execPath)}${delimiter}${process.env.PATH ?? ''}`;
  return env;
}

function run(
  command: string,
  args: readonly string[],
  cwd: string,
  env: Readonly<Record<string, string>> = {},
): Promise<Ran> {
  return new Promise((resolve) => {
    execFile(
      command,
      args,
      { cwd, env: { ...childEnv(), ...env }, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : null;
        resolve({ code, stdout, stderr: error !== null && code === null ? `${stderr}\n${error.message}` : stderr });
      },
    );
  });
}

function assertRan(ran: Ran, what: string): void {
  assert.equal(ran.code, 0, `${what} exited ${ran.code}\nstdout:\n${ran.stdout}\nstderr:\n${ran.stderr}`);
}

/** Every file under `dir`, as a posix path relative to it. */
function listFiles(dir: string, prefix = ''): string[] {
  return readdirSync(join(dir, prefix), { withFileTypes: true }).flatMap((entry) => {
    const path = prefix === '' ? entry.name : `${prefix}/${entry.name}`;
    return entry.isDirectory() ? listFiles(dir, path) : [path];
  });
}

/** The package a bare specifier names (`@scope/name/sub` → `@scope/name`); undefined for relative paths and builtins. */
function packageOf(specifier: string): string | undefined {
  if (specifier.startsWith('.') || specifier.startsWith('/') || isBuiltin(specifier)) return undefined;
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

/** The ```lang blocks of a markdown text. */
const codeBlocks = (markdown: string, lang: string): string[] =>
  [...markdown.matchAll(new RegExp(`\`\`\`${lang}\\n([\\s\\S]*?)\\n\`\`\``, 'g'))].map((m) => m[1] ?? '');

/** The text of the root README's "Install in your project" section. */
function installSection(): string {
  const readme = readFileSync(`${root}README.md`, 'utf8');
  const start = readme.indexOf('\n## Install in your project\n');
  assert.ok(start >= 0, 'README.md has an "Install in your project" section');
  const end = readme.indexOf('\n## ', start + 1);
  return readme.slice(start, end < 0 ? undefined : end);
}

/**
 * The workspace's better-sqlite3 binary as a prebuild tarball in `dir`, named
 * as better-sqlite3's install script looks for it (name, version, Node ABI,
 * platform, architecture); returns the version it was built from.
 */
async function workspaceSqlitePrebuild(dir: string): Promise<string> {
  const manifest = createRequire(import.meta.url).resolve('better-sqlite3/package.json');
  const { version } = readJson<Manifest>(manifest);
  const binary = 'build/Release/better_sqlite3.node';
  assert.ok(existsSync(join(dirname(manifest), binary)), `the workspace's better-sqlite3 is built (${binary})`);
  mkdirSync(dir, { recursive: true });
  const name = `better-sqlite3-v${version}-node-v${process.versions.modules}-${process.platform}-${process.arch}.tar.gz`;
  assertRan(await run('tar', ['-czf', join(dir, name), '-C', dirname(manifest), binary], dir), `tar -czf ${name}`);
  return version;
}

/**
 * A workspace of the packages alone under `dir`: the root's manifest and TypeScript base, each
 * package's files with its built code as a clean build leaves it (see {@link cleanBuild}), and
 * links to the node_modules they resolve their imports from.
 */
function packagesCopy(dir: string): string {
  mkdirSync(join(dir, 'packages'), { recursive: true });
  for (const file of ['package.json', 'tsconfig.base.json', '.pnpmfile.cjs', 'LICENSE']) {
    cpSync(join(root, file), join(dir, file));
  }
  writeFileSync(join(dir, 'pnpm-workspace.yaml'), 'packages:\n  - packages/*\n');
  symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'), 'dir');
  for (const name of readdirSync(join(root, 'packages'))) {
    const from = join(root, 'packages', name);
    const to = join(dir, 'packages', name);
    cpSync(from, to, {
      recursive: true,
      filter: (source) => {
        const [top, ...rest] = relative(from, source).split(sep);
        if (top === 'node_modules' || top === '.turbo') return false;
        return (
          top !== 'dist' ||
          rest.length === 0 ||
          statSync(source).isDirectory() ||
          cleanBuild(from, `dist/${rest.join('/')}`)
        );
      },
    });
    symlinkSync(join(from, 'node_modules'), join(to, 'node_modules'), 'dir');
  }
  return dir;
}

/**
 * The source a built file comes from (relative to its package: dist/x.js, x.js.map, x.d.ts and
 * x.d.ts.map come from src/x.ts; .cjs and .d.cts from .cts; .mjs from .mts); undefined for any
 * other file (the build info).
 */
function sourceOfBuilt(built: string): string | undefined {
  const m = /^dist\/(.+?)\.(?:d\.)?([cm]?)[jt]s(?:\.map)?$/.exec(built);
  return m === null ? undefined : `src/${m[1]}.${m[2]}ts`;
}

/** Whether a clean build of the package at `dir` (`tsc -b` on an emptied dist, its prepack) leaves `built`. */
function cleanBuild(dir: string, built: string): boolean {
  const source = sourceOfBuilt(built);
  return source !== undefined && existsSync(join(dir, source));
}

/** Every package's prepack: a build from its sources alone (what the copy packed here holds). */
const PREPACK = `node -e "require('node:fs').rmSync('dist', { recursive: true, force: true })" && tsc -b`;

const workspaceManifest = readJson<Manifest>(`${root}package.json`);
const workspacePackages = readdirSync(`${root}packages`)
  .map((dir) => ({ dir, manifest: readJson<Manifest>(`${root}packages/${dir}/package.json`) }))
  .filter(({ manifest }) => manifest.private !== true);
const workspaceVersions = new Map(workspacePackages.map(({ manifest }) => [manifest.name, manifest.version]));

describe('every package, packed and installed in a project outside the workspace', () => {
  const work = mkdtempSync(join(tmpdir(), 'troupe-install-'));
  const app = join(work, 'app');
  const packed: Packed[] = [];
  let installed: Ran | undefined;
  let sqliteVersion = '';

  after(() => rmSync(work, { recursive: true, force: true }));

  before(
    async () => {
      assert.ok(relative(root, work).startsWith('..'), `${work} is outside the workspace`);
      // The copy holds each package's build as its prepack (see PREPACK) would leave it.
      const tarballs = join(work, 'tarballs');
      assertRan(
        await run(
          'pnpm',
          ['-r', '--ignore-scripts', 'pack', '--pack-destination', tarballs],
          packagesCopy(join(work, 'workspace')),
        ),
        'pnpm -r pack',
      );
      for (const tarball of readdirSync(tarballs).filter((f) => f.endsWith('.tgz'))) {
        const into = join(work, 'unpacked', tarball.replace(/\.tgz$/, ''));
        mkdirSync(into, { recursive: true });
        assertRan(await run('tar', ['-xzf', join(tarballs, tarball), '-C', into], work), `tar -xzf ${tarball}`);
        const unpacked = join(into, 'package');
        const manifest = readJson<Manifest>(join(unpacked, 'package.json'));
        const dir = workspacePackages.find((p) => p.manifest.name === manifest.name)?.dir ?? '?';
        packed.push({ dir, tarball: join(tarballs, tarball), unpacked, manifest, files: new Set(listFiles(unpacked)) });
      }

      // The consumer: every tarball, each peer at the lowest version its range allows
      // (so a range that claims too much fails here), and TypeScript with Node's types.
      const peers = new Map<string, string[]>();
      for (const { manifest } of packed) {
        for (const [name, range] of Object.entries(manifest.peerDependencies ?? {})) {
          if (!workspaceVersions.has(name)) peers.set(name, [...(peers.get(name) ?? []), range]);
        }
      }
      const dependencies: Record<string, string> = {};
      for (const { manifest, tarball } of packed) dependencies[manifest.name] = `file:${tarball}`;
      for (const [name, ranges] of peers) {
        const lowest = ranges.map((r) => semver.minVersion(r)?.version ?? r).sort(semver.compare);
        const version = lowest[lowest.length - 1] ?? '';
        assert.ok(
          ranges.every((r) => semver.satisfies(version, r)),
          `${name}: no version is the lowest of every peer range ${ranges.join(', ')}`,
        );
        dependencies[name] = version;
      }
      for (const name of ['typescript', '@types/node']) {
        dependencies[name] = workspaceManifest.devDependencies?.[name] ?? 'latest';
      }
      // What the packages' README examples import besides the packages and their peers: a provider
      // package for @troupe/ai-sdk's (the version whose @ai-sdk/provider is the peer's lowest, so it
      // is installed once), and the JSON Schema types the AI SDK's declarations name.
      Object.assign(dependencies, { '@ai-sdk/anthropic': '4.0.0', '@types/json-schema': '7.0.15' });
      mkdirSync(app);
      writeFileSync(
        join(app, 'package.json'),
        JSON.stringify({ name: 'troupe-consumer', private: true, type: 'module', dependencies }, null, 2),
      );
      const prebuilds = join(work, 'prebuilds');
      sqliteVersion = await workspaceSqlitePrebuild(prebuilds);
      installed = await run('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error'], app, {
        npm_config_better_sqlite3_local_prebuilds: prebuilds,
      });
    },
    { timeout: 240_000 },
  );

  it('packs every package of packages/', () => {
    assert.deepEqual(packed.map((p) => p.manifest.name).sort(), workspacePackages.map((p) => p.manifest.name).sort());
  });

  it('builds every package clean when it is packed: its prepack empties dist, then runs tsc -b', () => {
    for (const { dir, manifest } of workspacePackages) {
      assert.equal(
        manifest.scripts?.prepack,
        PREPACK,
        `packages/${dir}'s prepack (what this test runs before it packs)`,
      );
    }
  });

  it('publishes manifests with what a registry and a user need, and no workspace-only ranges', () => {
    const rootLicense = readFileSync(`${root}LICENSE`, 'utf8');
    for (const { dir, manifest: m, files, unpacked } of packed) {
      const where = `${m.name}'s packed package.json`;
      for (const field of ['dependencies', 'peerDependencies', 'optionalDependencies', 'devDependencies'] as const) {
        for (const [name, range] of Object.entries(m[field] ?? {})) {
          assert.doesNotMatch(range, /^(workspace|link|file|portal):/, `${where}: ${field}.${name} is ${range}`);
        }
      }
      assert.ok(typeof m.description === 'string' && m.description.length > 20, `${where}: description`);
      assert.ok(Array.isArray(m.keywords) && m.keywords.length > 0, `${where}: keywords`);
      assert.equal(m.license, 'MIT', `${where}: license`);
      assert.equal(readFileSync(join(unpacked, 'LICENSE'), 'utf8'), rootLicense, `${m.name}: LICENSE is the root's`);
      assert.deepEqual(
        m.repository,
        { ...workspaceManifest.repository, directory: `packages/${dir}` },
        `${where}: repository`,
      );
      assert.equal(m.type, 'module', `${where}: type`);
      // The workspace's range, or a part of it where a package's own dependencies need a newer
      // Node.js (@troupe/ai-sdk: the AI SDK declares Node >= 22).
      assert.ok(
        m.engines?.node !== undefined && semver.subset(m.engines.node, workspaceManifest.engines?.node ?? '*'),
        `${where}: engines.node ${m.engines?.node} is within the workspace's ${workspaceManifest.engines?.node}`,
      );
      assert.ok(
        m.sideEffects === false ||
          (Array.isArray(m.sideEffects) && m.sideEffects.every((f) => files.has(posix.normalize(f)))),
        `${where}: sideEffects is false or lists files of the package`,
      );
      assert.ok(m.files?.includes('dist') && m.files.includes('README.md'), `${where}: files has dist and README.md`);
      for (const field of ['main', 'types'] as const) {
        const path = m[field];
        assert.ok(path !== undefined && files.has(posix.normalize(path)), `${where}: ${field} (${path}) is packed`);
      }
      assert.ok(m.exports?.['.'] !== undefined, `${where}: exports has "."`);
      for (const [subpath, target] of Object.entries(m.exports ?? {})) {
        if (typeof target === 'string') {
          assert.ok(files.has(posix.normalize(target)), `${where}: exports["${subpath}"] (${target}) is packed`);
          continue;
        }
        assert.deepEqual(Object.keys(target), ['types', 'default'], `${where}: exports["${subpath}"] is types first`);
        for (const path of Object.values(target)) {
          assert.ok(files.has(posix.normalize(path)), `${where}: exports["${subpath}"] → ${path} is packed`);
        }
      }
      for (const [name, range] of Object.entries({ ...m.dependencies, ...m.peerDependencies })) {
        const sibling = workspaceVersions.get(name);
        if (sibling !== undefined) {
          assert.ok(semver.satisfies(sibling, range), `${where}: ${name}@${range} admits the sibling ${sibling}`);
        }
      }
    }
  });

  it('packs a README whose links work on a registry page', () => {
    for (const { manifest, unpacked } of packed) {
      const readme = readFileSync(join(unpacked, 'README.md'), 'utf8');
      assert.match(readme, new RegExp(`^# ${manifest.name}\\n`), `${manifest.name}: README starts with its name`);
      assert.ok(codeBlocks(readme, 'ts').length > 0, `${manifest.name}: README has an example`);
      assert.ok(readme.includes(workspaceManifest.repository?.url?.replace(/^git\+|\.git$/g, '') ?? '?'));
      for (const [, target] of readme.matchAll(/\]\(([^)]+)\)/g)) {
        assert.match(target ?? '', /^(https:\/\/|#)/, `${manifest.name}: README link ${target} is absolute`);
      }
    }
  });

  it('packs the built code and its sources (the maps resolve), and no build info, tests or benchmarks', () => {
    for (const { manifest, files, unpacked } of packed) {
      for (const file of files) {
        assert.doesNotMatch(file, /\.tsbuildinfo$/, `${manifest.name}: ${file}`);
        const text = readFileSync(join(unpacked, file), 'utf8');
        assert.ok(!text.includes(root), `${manifest.name}: ${file} names a path of the workspace (${root})`);
        assert.ok(!text.includes(work), `${manifest.name}: ${file} names a path of the packing (${work})`);
        assert.doesNotMatch(
          file,
          /(^|\/)(tests?|__tests__|bench|fixtures)\/|\.(test|spec|bench)\.[cm]?[jt]s/,
          `${manifest.name}: ${file}`,
        );
        if (file.startsWith('dist/')) {
          const source = sourceOfBuilt(file);
          assert.ok(
            source !== undefined && files.has(source),
            `${manifest.name}: ${file} is built from ${source ?? 'no source'}, which is not packed`,
          );
        }
        if (file.endsWith('.map')) {
          const map = readJson<{ sources: string[] }>(join(unpacked, file));
          for (const source of map.sources) {
            const resolved = posix.normalize(posix.join(posix.dirname(file), source));
            assert.ok(files.has(resolved), `${manifest.name}: ${file} maps to ${source}, which is not packed`);
          }
        } else if (/\.(?:d\.)?[cm]?[jt]s$/.test(file) && file.startsWith('dist/')) {
          const url = /\/\/# sourceMappingURL=(\S+)\s*$/.exec(readFileSync(join(unpacked, file), 'utf8'))?.[1];
          if (url !== undefined) {
            const resolved = posix.normalize(posix.join(posix.dirname(file), url));
            assert.ok(files.has(resolved), `${manifest.name}: ${file} names its map ${url}, which is not packed`);
          }
        }
      }
    }
  });

  it('declares every package its code imports, and imports every package it declares', () => {
    for (const { manifest: m, files, unpacked } of packed) {
      const declared = new Set([...Object.keys(m.dependencies ?? {}), ...Object.keys(m.peerDependencies ?? {})]);
      const used = new Set<string>();
      for (const file of files) {
        if (!file.startsWith('dist/') || !/\.[cm]?[jt]s$/.test(file)) continue;
        const { importedFiles } = ts.preProcessFile(readFileSync(join(unpacked, file), 'utf8'), true, true);
        for (const { fileName } of importedFiles) {
          const name = packageOf(fileName);
          if (name === undefined || name === m.name) continue;
          used.add(name);
          assert.ok(declared.has(name), `${m.name}: ${file} imports ${fileName}, not in dependencies or peers`);
        }
      }
      // A package's types (`@types/pg`) are used where the package is: its declarations import `pg`.
      const usedAs = (name: string) => used.has(name) || (name.startsWith('@types/') && used.has(name.slice(7)));
      for (const name of declared) assert.ok(usedAs(name), `${m.name} declares ${name} but never imports it`);
    }
  });

  it('installs with npm, one copy of each package and peer', (t) => {
    assert.ok(installed !== undefined);
    assertRan(installed, 'npm install');
    const copies = new Map<string, string[]>();
    const walk = (modules: string): void => {
      for (const entry of existsSync(modules) ? readdirSync(modules) : []) {
        const names = entry.startsWith('@') ? readdirSync(join(modules, entry)).map((n) => `${entry}/${n}`) : [entry];
        for (const name of names) {
          copies.set(name, [...(copies.get(name) ?? []), join(modules, name)]);
          walk(join(modules, name, 'node_modules'));
        }
      }
    };
    walk(join(app, 'node_modules'));
    const single = [
      ...packed.map((p) => p.manifest.name),
      ...packed.flatMap((p) => Object.keys(p.manifest.peerDependencies ?? {})),
    ];
    for (const name of new Set(single)) {
      assert.equal(copies.get(name)?.length, 1, `${name} is installed once: ${copies.get(name)?.join(', ')}`);
    }
    // node-gyp leaves its Makefile behind; a prebuild is the binary alone.
    const sqlite = join(app, 'node_modules/better-sqlite3');
    const { version } = readJson<Manifest>(join(sqlite, 'package.json'));
    t.diagnostic(
      existsSync(join(sqlite, 'build/Makefile'))
        ? `better-sqlite3 ${version} was built from source by npm`
        : `better-sqlite3 ${version}: the workspace's build of ${sqliteVersion} was used`,
    );
  });

  it("compiles a consumer, the quick start and the packages' README examples with --strict and skipLibCheck: false", {
    timeout: 120_000,
  }, async () => {
    assertRan(installed ?? { code: null, stdout: '', stderr: 'not installed' }, 'npm install');
    // The tsconfig the README tells users to start from, held to the strictest reading.
    const [readmeConfig] = codeBlocks(installSection(), 'json');
    assert.ok(readmeConfig !== undefined, 'the install section shows a tsconfig.json');
    writeFileSync(join(app, 'tsconfig.readme.json'), readmeConfig);
    writeFileSync(
      join(app, 'tsconfig.json'),
      JSON.stringify({
        extends: './tsconfig.readme.json',
        compilerOptions: {
          strict: true,
          skipLibCheck: false,
          outDir: 'dist',
          rootDir: 'src',
          // The AI SDK's and the MCP SDK's declarations name DOM types (HeadersInit, FileList), as
          // @troupe/ai-sdk's and @troupe/mcp's READMEs tell their users.
          lib: [
            ...((JSON.parse(readmeConfig) as { compilerOptions: { lib: string[] } }).compilerOptions.lib ?? []),
            'dom',
          ],
        },
        include: ['src'],
      }),
    );
    cpSync(`${root}test/install/src`, join(app, 'src'), { recursive: true });
    cpSync(`${root}examples/src/quickstart.ts`, join(app, 'src/quickstart.ts'));
    cpSync(`${root}examples/src/agents/quickstart.ts`, join(app, 'src/agents/quickstart.ts'));
    // A README's examples go in one directory per package; a block whose first line is
    // `// <name>.ts` is that file (so one example can import another), the others are numbered.
    let examples = 0;
    for (const { dir, unpacked } of packed) {
      mkdirSync(join(app, 'src/readme', dir), { recursive: true });
      for (const [i, code] of codeBlocks(readFileSync(join(unpacked, 'README.md'), 'utf8'), 'ts').entries()) {
        const name = /^\/\/ ([\w.-]+\.[cm]?ts)\b/.exec(code)?.[1] ?? `example-${i + 1}.ts`;
        writeFileSync(join(app, 'src/readme', dir, name), `${code}\n`);
        examples++;
      }
    }
    assert.ok(examples >= packed.length);

    const tsc = await run(process.execPath, [join(app, 'node_modules/typescript/bin/tsc'), '-p', app], app);
    assertRan(tsc, 'tsc -p . (strict, skipLibCheck: false)');
  });

  it('runs the consumer: a subagent on a worker thread, its scope checked by zod', { timeout: 60_000 }, async () => {
    const ran = await run(process.execPath, ['dist/main.js'], app);
    assertRan(ran, 'node dist/main.js');
    const printed = JSON.parse(ran.stdout) as { result: { threadId?: unknown } | null };
    const threadId = printed.result?.threadId;
    assert.ok(typeof threadId === 'number' && threadId > 0, `the tool ran on worker thread ${threadId}`);
    assert.deepEqual(printed, {
      mainThreadId: 0,
      status: 'done',
      result: { label: 'installed', tenantId: 'acme', threadId },
      updates: [{ op: 'append', key: 'labels', value: 'installed' }],
      refused: 'ERR_INVALID_ARGUMENT',
    });
  });

  it('runs the consumer from CommonJS (require of the ES modules)', { timeout: 60_000 }, async () => {
    const ran = await run(process.execPath, ['dist/require.cjs'], app);
    assertRan(ran, 'node dist/require.cjs');
    const { status, result } = JSON.parse(ran.stdout) as {
      status: string;
      result: { tenantId: string; threadId: number };
    };
    assert.equal(status, 'done', ran.stdout);
    assert.equal(result.tenantId, 'cjs');
    assert.ok(result.threadId > 0, `the tool ran on worker thread ${result.threadId}`);
  });

  it("runs the README's quick start as installed", { timeout: 60_000 }, async () => {
    const ran = await run(process.execPath, ['dist/quickstart.js'], app);
    assertRan(ran, 'node dist/quickstart.js');
    assert.match(ran.stdout, /asks: Refund A-1\?/);
    assert.match(ran.stdout, /status: 'done',\s+text: 'refunded A-1'/);
  });

  it('runs the consumer with @troupe/sqlite: a conversation restored from the file by a new supervisor', {
    timeout: 60_000,
  }, async () => {
    const ran = await run(process.execPath, ['dist/store.js'], app);
    assertRan(ran, 'node dist/store.js');
    assert.deepEqual(JSON.parse(ran.stdout), { status: 'done', file: true, restored: { labels: ['installed'] } });
  });

  it('runs the consumer with @troupe/openai: a worker streams an answer from a server on 127.0.0.1', {
    timeout: 60_000,
  }, async () => {
    const ran = await run(process.execPath, ['dist/model.js'], app);
    assertRan(ran, 'node dist/model.js');
    assert.deepEqual(JSON.parse(ran.stdout), {
      status: 'done',
      result: 'hello from the server',
      usage: { inputTokens: 7, outputTokens: 4 },
      requests: [{ url: '/v1/chat/completions', model: 'consumer-model', authorization: 'Bearer consumer-key' }],
    });
  });
});
