import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A fresh directory under the OS temp dir, and a way to remove it with everything in it. */
export function tempDir(label: string): { dir: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), `troupe-${label}-`));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
