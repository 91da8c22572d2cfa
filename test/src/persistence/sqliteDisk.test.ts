import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { isTroupeError } from '@troupe/core';
import { sqlitePersistence } from '@troupe/sqlite';
import { ctx, envelope, loopState } from './records.js';
import { tempDir } from './sqliteFiles.js';

// Real failures, not simulated ones: a tmpfs of a fixed size fills up, and
// the immutable attribute (chattr +i) makes a file refuse writes even to a
// process that has it open (root ignores permission bits, not this).
const dirs: { remove(): void }[] = [];
after(() => {
  for (const d of dirs) d.remove();
});

function tryRun(command: string, args: string[]): string | undefined {
  try {
    execFileSync(command, args, { stdio: 'pipe' });
    return undefined;
  } catch (error) {
    return `${command} ${args.join(' ')}: ${(error as Error).message.split('\n')[0]}`;
  }
}

const c = ctx('c1');
const bigState = (savedAt: number) =>
  envelope(c, {
    savedAt,
    state: { ...loopState(c.agentId), metadata: { blob: randomBytes(24 * 1024).toString('base64') } },
  });

describe('SqlitePersistence on a failing disk', () => {
  it('a full disk: the commit rejects with ERR_STORE_WRITE and nothing of it is visible; earlier commits are intact', async (t) => {
    const d = tempDir('full');
    dirs.push(d);
    const failed = tryRun('mount', ['-t', 'tmpfs', '-o', 'size=512k', 'tmpfs', d.dir]);
    if (failed !== undefined) {
      t.skip(`cannot mount a small tmpfs here (${failed}): run as root to test a full disk`);
      return;
    }
    try {
      const store = sqlitePersistence({ file: join(d.dir, 'store.sqlite') });
      let saved = 0;
      let error: unknown;
      for (let i = 1; i <= 100 && error === undefined; i++) {
        try {
          await store.commit({}, { envelope: bigState(i), messages: [{ role: 'user', content: `turn ${i}` }] }, c);
          saved = i;
        } catch (e) {
          error = e;
        }
      }
      assert.ok(saved >= 1, 'some turns fit on the disk');
      assert.ok(isTroupeError(error, 'ERR_STORE_WRITE'), String(error));
      t.diagnostic(`${saved} turns fit; then: ${(error as Error).message}`);
      assert.match((error as Error).message, /disk is full|could not be written/);
      assert.equal((await store.loadState({}, c))?.savedAt, saved);
      const messages = await store.loadMessages({}, c);
      assert.deepEqual(
        messages.map((m) => m.content),
        Array.from({ length: saved }, (_, i) => `turn ${i + 1}`),
      );
      await store.close();
    } finally {
      execFileSync('umount', [d.dir]);
    }
  });

  it('a file made read-only while open: the write rejects with ERR_STORE_WRITE, nothing of it is visible, and writes resume after', async (t) => {
    const d = tempDir('ro');
    dirs.push(d);
    const path = join(d.dir, 'store.sqlite');
    const store = sqlitePersistence({ file: path });
    await store.commit({}, { envelope: envelope(c, { savedAt: 1 }), messages: [{ role: 'user', content: 'one' }] }, c);
    const failed = tryRun('chattr', ['+i', path, `${path}-wal`]);
    if (failed !== undefined) {
      await store.close();
      t.skip(`cannot make a file immutable here (${failed})`);
      return;
    }
    try {
      await assert.rejects(
        store.commit({}, { envelope: envelope(c, { savedAt: 2 }), messages: [{ role: 'user', content: 'two' }] }, c),
        (e) => isTroupeError(e, 'ERR_STORE_WRITE') && (e as Error).message.includes(path),
      );
      assert.equal((await store.loadState({}, c))?.savedAt, 1);
      assert.deepEqual(
        (await store.loadMessages({}, c)).map((m) => m.content),
        ['one'],
      );
    } finally {
      execFileSync('chattr', ['-i', path, `${path}-wal`]);
    }
    await store.commit({}, { envelope: envelope(c, { savedAt: 3 }) }, c);
    assert.equal((await store.loadState({}, c))?.savedAt, 3);
    await store.close();
  });

  it('a read-only file at open: refused with ERR_STORE_WRITE naming the file', async (t) => {
    const d = tempDir('ro-open');
    dirs.push(d);
    const path = join(d.dir, 'store.sqlite');
    await sqlitePersistence({ file: path }).close();
    const failed = tryRun('chattr', ['+i', path]);
    if (failed !== undefined) {
      t.skip(`cannot make a file immutable here (${failed})`);
      return;
    }
    try {
      assert.throws(
        () => sqlitePersistence({ file: path }),
        (e: unknown) =>
          isTroupeError(e, 'ERR_STORE_WRITE') &&
          (e as Error).message.includes(path) &&
          /writable/.test((e as Error).message),
      );
    } finally {
      execFileSync('chattr', ['-i', path]);
    }
  });
});
