// Issue 13 item 6: a supervisor on SQLite killed with SIGKILL at random points — mid-turn,
// mid-tool, mid-restore — fifty times over one file; each new process restores what the last left.
// Checked after every kill: every message a process reported saved is in the file. At the end:
// every interrupted message was resumed, every open request answered, and no side effect that is
// not safe to repeat happened twice (they are counted in a file of their own).
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { sqlitePersistence } from '@troupe/sqlite';
import Database from 'better-sqlite3';
import { startProcess } from '../examples/startProcess.js';
import { byDepth } from '../fixtures/testDepth.js';
import { tempDir } from './sqliteFiles.js';

const CHILD = fileURLToPath(new URL('./crashChild.js', import.meta.url));
// 50 rounds in the deep tier (TROUPE_TEST_DEPTH=deep), 12 in pnpm test.
const ROUNDS = Number(process.env.TROUPE_CRASH_ROUNDS ?? byDepth({ quick: 12, deep: 50 }));
const scope = { org: 'acme', userId: 'crash' };

const dirs: { remove(): void }[] = [];
after(() => {
  for (const d of dirs) d.remove();
});

// The test's own choices of when to kill (seeded: a failure names its seed and replays).
function chooser(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s / 0x1_0000_0000;
  };
}

describe('restore after a crash (SIGKILL)', () => {
  it(`${ROUNDS} kills at random points: saved messages stay, open requests are answerable, interrupted runs resume, no side effect twice`, async () => {
    const d = tempDir('crash');
    dirs.push(d);
    const file = join(d.dir, 'troupe.sqlite');
    const effects = join(d.dir, 'effects.log');
    const seed = Number(process.env.TROUPE_CRASH_SEED ?? Date.now() % 100_000);
    const random = chooser(seed);
    const facts = { interrupted: 0, resumed: 0, answered: 0, saved: 0, killedBeforeReady: 0 };
    const statuses = new Set<string>();

    for (let round = 0; round < ROUNDS; round++) {
      const child = startProcess(CHILD, {
        CRASH_FILE: file,
        CRASH_EFFECTS: effects,
        CRASH_SEED: String(seed * 1000 + round),
      });
      // The kill lands after a random number of the child's lines (events, not time): a quarter
      // of the rounds somewhere in its start or its restore, the rest after a random number of
      // steps of its work (a turn, a tool call starting or ending — mid-turn, mid-tool, between
      // messages). SIGKILL arrives while the child goes on, so the exact point is the process's.
      const early = random() < 0.25;
      let at = early ? Math.floor(random() * 8) : -1;
      if (!early) {
        await Promise.race([child.line(/^ready$/), child.exited]);
        at = child.lines.indexOf('ready') + 1 + Math.floor(random() * 150);
      }
      if (at > 0) await Promise.race([child.line(/^/, at - 1), child.exited]);
      if (!child.lines.includes('ready')) facts.killedBeforeReady++;
      process.stderr.write(
        `round ${round} at ${at} lines ${child.lines.length} ready ${child.lines.indexOf('ready')}\n`,
      );
      child.child.kill('SIGKILL');
      const exit = await child.exited;
      assert.ok(
        exit.signal === 'SIGKILL',
        `round ${round} (seed ${seed}): the child ended before it was killed (${JSON.stringify(exit)}): ${child.stderr()}`,
      );
      // Every message a reply reported saved is in the file.
      const saved = new Map<string, [number, number]>();
      for (const line of child.lines) {
        const [fact, id, a, b] = line.split(' ');
        if (fact === 'saved') {
          facts.saved++;
          const prev = saved.get(id as string) ?? [0, 0];
          saved.set(id as string, [Math.max(prev[0], Number(a)), Math.max(prev[1], Number(b))]);
        } else if (fact === 'interrupted') facts.interrupted++;
        else if (fact === 'resumed') {
          facts.resumed++;
          statuses.add(a as string);
        } else if (fact === 'answered') {
          facts.answered++;
          statuses.add(a as string);
        }
      }
      const store = sqlitePersistence({ file, tenantKey: (s) => (s as { org: string }).org });
      try {
        for (const [id, [users, assistants]] of saved) {
          const messages = await store.loadMessages(scope, { agentId: id as never, conversationId: id });
          const have = [
            messages.filter((m) => m.role === 'user').length,
            messages.filter((m) => m.role === 'assistant').length,
          ];
          assert.ok(
            (have[0] as number) >= users && (have[1] as number) >= assistants,
            `round ${round} (seed ${seed}): ${id} was reported with ${users}/${assistants} messages saved, the file has ${have.join('/')}`,
          );
        }
      } finally {
        await store.close();
      }
    }

    // A last process restores everything and stops cleanly.
    const last = startProcess(CHILD, {
      CRASH_FILE: file,
      CRASH_EFFECTS: effects,
      CRASH_SEED: '7',
      CRASH_MODE: 'final',
    });
    const exit = await last.exited;
    assert.equal(exit.code, 0, `the final restore failed: ${last.stderr()}`);
    const final = last.lines.find((l) => l.startsWith('final '));
    assert.ok(final !== undefined, last.lines.join('\n'));
    const [, conversations, open, interrupted] = final.split(' ').map(Number);
    assert.ok((conversations as number) > 0, 'conversations were saved');
    assert.equal(open, 0, 'every open request was answered');
    assert.equal(interrupted, 0, 'every interrupted message was resumed');
    for (const line of last.lines)
      if (line.startsWith('resumed') || line.startsWith('answered')) statuses.add(line.split(' ')[2] as string);
    // No message was dropped on the way: every parent's run the file holds has ended (a
    // conversation restored idle over a run left interrupted would keep it so for ever).
    const db = new Database(file, { readonly: true });
    try {
      const live = db
        .prepare(
          `SELECT run_id AS runId, status FROM runs
           WHERE json_extract(json, '$.kind') = 'message' AND status IN ('running', 'interrupted', 'suspended')`,
        )
        .all();
      assert.deepEqual(live, [], `seed ${seed}: parents' runs left unfinished after the final restore`);
    } finally {
      db.close();
    }

    // No side effect that is not safe to repeat happened twice.
    const lines = existsSync(effects) ? readFileSync(effects, 'utf8').trim().split('\n') : [];
    const once = lines.filter((l) => l.startsWith('charge ') || l.startsWith('release '));
    const seen = new Map<string, number>();
    for (const l of once) seen.set(l, (seen.get(l) ?? 0) + 1);
    const twice = [...seen].filter(([, n]) => n > 1);
    assert.deepEqual(twice, [], `seed ${seed}: side effects that happened more than once`);
    assert.ok(once.length > ROUNDS, `work was done (${once.length} side effects; ${JSON.stringify(facts)})`);
    // The kills landed where they should: some mid-message (interrupted, then resumed).
    assert.ok(facts.interrupted > 0 && facts.resumed > 0 && facts.answered > 0, JSON.stringify(facts));
    assert.ok(!statuses.has('failed'), `no resume or answer failed (${[...statuses].join(', ')})`);
    process.stdout.write(
      `crash facts: ${JSON.stringify({ seed, ...facts, sideEffects: once.length, statuses: [...statuses] })}\n`,
    );
  });
});
