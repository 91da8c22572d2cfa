// The README's code samples are real: each ```ts block that starts with a
// `// examples/src/...` line must be that file, byte for byte (the file is
// compiled by `tsc -b` and run by demo.test.ts).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { it } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../../', import.meta.url));

it('README code blocks that name an examples file show that file as it is', () => {
  const readme = readFileSync(`${root}README.md`, 'utf8');
  const blocks = [...readme.matchAll(/```ts\n\/\/ (examples\/src\/[\w/.-]+\.ts)\n([\s\S]*?)\n```/g)];
  assert.ok(blocks.length >= 2, 'the quick start shows its two files');
  for (const [, path, code] of blocks) {
    const file = readFileSync(`${root}${path}`, 'utf8').replace(/\n$/, '');
    assert.equal(code, file, `README's copy of ${path} differs from the file`);
  }
});
