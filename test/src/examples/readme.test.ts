// The README's code samples are real: each ```ts block must start with a
// `// examples/src/...` line and be that file, byte for byte (the file is
// compiled by `tsc -b`, so every TypeScript block is type-checked), and each
// ```console block that runs `node examples/dist/<file>.js` shows what that
// example prints (agent ids, random per run, read as `agent_…`).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const readme = readFileSync(`${root}README.md`, 'utf8');

/** Fenced blocks of a language: the fence (three backticks or more) closes with the same fence. */
function blocks(lang: string): string[] {
  return [...readme.matchAll(new RegExp(`^(\`{3,})${lang}\\n([\\s\\S]*?)\\n\\1$`, 'gm'))].map((m) => m[2] ?? '');
}

it('every TypeScript block of the README is an examples file (so tsc -b type-checks it)', () => {
  const ts = [...blocks('ts'), ...blocks('typescript'), ...blocks('tsx')];
  assert.ok(ts.length >= 4, `the README shows its examples (${ts.length} blocks)`);
  for (const code of ts) {
    assert.match(
      code,
      /^\/\/ examples\/src\/[\w/.-]+\.ts\n/,
      `a block that names no examples file:\n${code.slice(0, 200)}`,
    );
  }
});

it('README code blocks that name an examples file show that file as it is', () => {
  const named = blocks('ts').map((code) => /^\/\/ (examples\/src\/[\w/.-]+\.ts)\n([\s\S]*)$/.exec(code));
  assert.ok(named.length >= 4, 'the quick start, the models, streaming and persistence show their files');
  for (const m of named) {
    assert.ok(m !== null);
    const [, path, code] = m;
    const file = readFileSync(`${root}${path}`, 'utf8').replace(/\n$/, '');
    assert.equal(code, file, `README's copy of ${path} differs from the file`);
  }
});

it('console blocks that run an example show what it prints', { timeout: 60_000 }, async () => {
  const runs = blocks('console')
    .map((text) => /^\$ .*\bnode (examples\/dist\/[\w/.-]+\.js)\n([\s\S]*)$/.exec(text))
    .filter((m) => m !== null);
  assert.ok(runs.length >= 2, 'the quick start and the persistence example show their output');
  for (const [, script, shown] of runs) {
    const { stdout } = await promisify(execFile)(process.execPath, [`${root}${script}`], { cwd: root });
    assert.equal(stdout.replace(/agent_[0-9A-Za-z]+/g, 'agent_…').trimEnd(), shown, `what ${script} prints`);
  }
});
