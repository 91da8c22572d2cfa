// A write that fails once (a disk that filled up for a moment, a file briefly read-only) while a
// subagent's tool calls are being marked started. What must hold: the side effect does not run,
// the run fails with ERR_STORE_WRITE, and — the disk being fine again — what is saved says how
// the run ended. What happens: Durability.beforeCalls records the calls as started in memory
// before the store took them, so the run's final write (ended(), which commits every call it
// believes started) is refused by the store as a whole — ERR_INVALID_ARGUMENT "tool call ... was
// never started: call startToolCalls before its side effect", a bug-like message for an operator
// — and the child's row stays `running` in the file (a later process reads it as interrupted).
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { TroupeError } from '@troupe/core';
import { SqlitePersistence } from '@troupe/sqlite';
import { createSupervisor, type PersistenceContext, type ToolCallStart } from '@troupe/supervisor';
import { office } from '../fixtures/agents/durable.js';
import { tempDir } from './sqliteFiles.js';

const dirs: { remove(): void }[] = [];
after(() => {
  for (const d of dirs) d.remove();
});

/** The SQLite store whose next startToolCalls fails as a full disk would (nothing of it saved). */
class OnceFullStore extends SqlitePersistence {
  failNext = false;
  override async startToolCalls(scope: unknown, calls: readonly ToolCallStart[], context: PersistenceContext) {
    if (this.failNext) {
      this.failNext = false;
      throw new TroupeError(`recording started tool calls on ${this.file} failed: the disk is full`, {
        code: 'ERR_STORE_WRITE',
      });
    }
    return super.startToolCalls(scope, calls, context);
  }
}

describe('a tool-call start that failed to save', () => {
  it('the tool does not run, the run fails with ERR_STORE_WRITE, and its end is saved once the disk is back', async () => {
    const d = tempDir('failed-start');
    dirs.push(d);
    const effects = join(d.dir, 'effects.txt');
    const scope = { org: 'acme', userId: 'alice' };
    const store = new OnceFullStore({ file: join(d.dir, 't.sqlite') });
    const supervisor = createSupervisor({ agents: [office], pool: { threads: 2 }, persistence: store });
    const storeErrors: string[] = [];
    supervisor.on('persistence.failed', (e) =>
      storeErrors.push(`${e.agentId} ${(e.error as { code?: string }).code}: ${e.error.message}`),
    );
    let childRun: string | undefined;
    supervisor.on('subagent.spawned', (e) => {
      childRun = e.runId;
      store.failNext = true;
    });
    try {
      const agent = await supervisor.startAgent(office, { scope, agentId: 'o1', toolContext: { effects } });
      const reply = await agent.send('delegate');
      assert.equal(existsSync(effects) ? readFileSync(effects, 'utf8') : '', '', 'no side effect ran');
      const [report] = JSON.parse((reply as { text: string }).text) as { error?: { code?: string } }[];
      assert.equal(report?.error?.code, 'ERR_STORE_WRITE', (reply as { text: string }).text);

      const row = await store.getRun(scope, childRun as string);
      assert.deepEqual(
        { refused: storeErrors.filter((e) => !/ERR_STORE_WRITE/.test(e)), childRow: row?.status },
        { refused: [], childRow: 'failed' },
        'the only store failure is the disk’s (no write refused for a call that was never started), and the child’s row says how it ended',
      );
    } finally {
      await supervisor.close();
    }
  });

  it('a parent’s own tool: the host is told `failed`; after a clean close and a restart the message is not resurrected as interrupted (and its charge not run by resume)', async () => {
    const d = tempDir('failed-start-parent');
    dirs.push(d);
    const file = join(d.dir, 't.sqlite');
    const effects = join(d.dir, 'effects.txt');
    const scope = { org: 'acme', userId: 'alice' };
    const store = new OnceFullStore({ file });
    const first = createSupervisor({ agents: [office], pool: { threads: 2 }, persistence: store });
    const agent = await first.startAgent(office, { scope, agentId: 'o1', toolContext: { effects } });
    store.failNext = true;
    // "charge": the parent's own lookup + charge, in one turn.
    const reply = await agent.send('charge');
    assert.equal(reply.status, 'failed');
    assert.equal(agent.status, 'idle');
    await first.close();
    assert.equal(existsSync(effects) ? readFileSync(effects, 'utf8') : '', '', 'nothing was charged');

    const second = createSupervisor({
      agents: [office],
      pool: { threads: 2 },
      persistence: new SqlitePersistence({ file }),
    });
    try {
      const restored = await second.startAgent(office, { scope, agentId: 'o1', toolContext: { effects } });
      // What was saved must be what the host saw: a message that failed, not one cut mid-turn that
      // resume() (the daemon: the next message) runs again, charging the customer after all.
      assert.equal(
        restored.status,
        'idle',
        `the conversation was closed cleanly after a failed message; the file says ${restored.status} (its message's end was refused by the store: "never started")`,
      );
    } finally {
      await second.close();
    }
  });
});
