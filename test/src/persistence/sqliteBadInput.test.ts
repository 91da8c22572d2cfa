// Bad input at the SQLite store's edges: every one must be a typed TroupeError that says what to
// do (issue 13 "Bad input"; STYLE: one error base with stable codes) — never a raw Node error, a
// TypeError, or an ERR_INTERNAL that blames the store for the caller's input.
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { isTroupeError } from '@troupe/core';
import { sqlitePersistence } from '@troupe/sqlite';
import { MemoryPersistence } from '@troupe/supervisor';
import { tempDir } from './sqliteFiles.js';

const dirs: { remove(): void }[] = [];
after(() => {
  for (const d of dirs) d.remove();
});
function dir(): string {
  const d = tempDir('badinput');
  dirs.push(d);
  return d.dir;
}

function typed(codes: readonly string[], mentions?: string) {
  return (error: unknown) => {
    assert.ok(
      codes.some((c) => isTroupeError(error, c as never)),
      `expected a TroupeError ${codes.join(' or ')}, got ${(error as Error)?.constructor?.name} ${(error as { code?: string })?.code}: ${(error as Error)?.message}`,
    );
    if (mentions !== undefined) assert.ok((error as Error).message.includes(mentions), (error as Error).message);
    return true;
  };
}

describe('sqlitePersistence: bad files', () => {
  it('a file option that names a directory is refused with a typed error naming it', () => {
    const path = join(dir(), 'a-directory');
    mkdirSync(path);
    assert.throws(() => sqlitePersistence({ file: path }), typed(['ERR_STORE_CORRUPT', 'ERR_STORE_WRITE'], path));
  });

  it('a file in a directory that does not exist: ERR_STORE_WRITE (not ERR_INTERNAL, "a bug of the store")', () => {
    const path = join(dir(), 'missing', 'troupe.sqlite');
    assert.throws(() => sqlitePersistence({ file: path }), typed(['ERR_STORE_WRITE'], path));
  });
});

describe('the SQLite store refuses malformed ids and options like the in-memory one (ERR_INVALID_ARGUMENT)', () => {
  const scope = { org: 'acme' };
  for (const [label, make] of [
    ['sqlite', () => sqlitePersistence({ file: join(dir(), 'troupe.sqlite') })],
    ['memory', () => new MemoryPersistence()],
  ] as const) {
    it(`${label}: getRun / getRequest / answerRequest / withdrawRequest with an object id`, async () => {
      const store = make();
      try {
        const id = {} as unknown as string;
        await assert.rejects(store.getRun(scope, id), typed(['ERR_INVALID_ARGUMENT']));
        await assert.rejects(store.getRequest(scope, id), typed(['ERR_INVALID_ARGUMENT']));
        await assert.rejects(store.answerRequest(scope, id, { id: 'x', ok: true }, 1), typed(['ERR_INVALID_ARGUMENT']));
        await assert.rejects(store.withdrawRequest(scope, id, 1), typed(['ERR_INVALID_ARGUMENT']));
      } finally {
        await store.close();
      }
    });

    it(`${label}: markInterrupted(null) and a non-finite now are refused`, async () => {
      const store = make();
      try {
        await assert.rejects(store.markInterrupted(null as never), typed(['ERR_INVALID_ARGUMENT']));
        await assert.rejects(store.markInterrupted({ now: 'soon' as never }), typed(['ERR_INVALID_ARGUMENT']));
        await assert.rejects(
          store.prune({ finishedRunsOlderThanMs: 1, now: Number.NaN }),
          typed(['ERR_INVALID_ARGUMENT']),
        );
      } finally {
        await store.close();
      }
    });
  }
});
