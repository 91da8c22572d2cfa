// Issue 31, item 1: a worker holding its own, valid capability floods the
// supervisor with well-formed checkpoints (2 KB of state, a fresh call id
// each) without awaiting the replies, under the flood limit. Each one is a
// durable write; served one after another they held the supervisor thread for
// seconds, and a close() waited for thousands of them. An honest worker has one
// checkpoint in flight per run (its loop awaits each): a second one before the
// first is answered is refused, counted, and its thread recycled.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { HostOp } from '@troupe/core/internal';
import { sqlitePersistence } from '@troupe/sqlite';
import Database from 'better-sqlite3';
import { intruderDesk } from '../fixtures/agents/hostileDesk.js';
import { tempDir } from '../persistence/sqliteFiles.js';
import { hostileSupervisor, nextEvent } from './hostileSupervisor.js';

const FLOOD = 20_000;
const scope = Object.freeze({ tenant: 't-flood' });
const dirs: { remove(): void }[] = [];
after(() => {
  for (const d of dirs) d.remove();
});

/** The intruder's input: `FLOOD` checkpoints of its run, none awaited (each with its own seq and call id). */
function flood(extra: Record<string, unknown> = {}): string {
  const checkpoint = [
    HostOp.checkpoint,
    '$seq',
    '$cap',
    {
      phase: 'before',
      state: { agentId: 'flood', messages: [], note: '$blob' },
      calls: [{ id: '$n', name: 'attack', idempotent: false }],
    },
  ];
  return JSON.stringify({
    tool: 'attack',
    args: { on: 'host', message: checkpoint, times: FLOOD, blob: 2048, ...extra },
    bait: false,
  });
}

function place(): string {
  const d = tempDir('checkpoint-flood');
  dirs.push(d);
  return join(d.dir, 'troupe.sqlite');
}

/** Tool calls the flood's checkpoints marked started (their ids are the intruder's `n-…`). */
function floodCalls(file: string): number {
  const db = new Database(file, { readonly: true });
  try {
    const row = db.prepare(`SELECT count(*) AS n FROM tool_calls WHERE tool_call_id LIKE 'n-%'`).get() as {
      n: number;
    };
    return row.n;
  } finally {
    db.close();
  }
}

describe('a flood of valid checkpoints', () => {
  it('a second checkpoint before the first is answered is refused, counted, and its thread recycled', async () => {
    const file = place();
    const store = sqlitePersistence({ file, tenantKey: (s) => (s as { tenant: string }).tenant });
    const h = await hostileSupervisor({ persistence: store, pool: { threads: 1 } });
    try {
      const desk = await h.supervisor.startAgent(intruderDesk, { scope, agentId: 'flood-1' });
      const reply = await desk.send(flood());
      assert.equal(reply.status, 'done', JSON.stringify(reply));
      const refusal = h.refused.find((r) => /a second checkpoint before the first was answered/.test(r.reason));
      assert.ok(refusal, `no host.refused for the flood; saw ${JSON.stringify(h.refused.map((r) => r.reason))}`);
      assert.equal(refusal.recycled, true);
      assert.match(refusal.agentId ?? '', /^flood-1-sub-/, 'it names the subagent');
      assert.ok(
        h.recycled.some((r) => r.threadId === refusal.threadId && r.reason === 'protocol'),
        'worker.recycled names the thread that sent it',
      );
      // The subagent's run ended crashed (recycled); the desk's reply says so.
      assert.match((reply as { text: string }).text, /recycled/);
      assert.ok(floodCalls(file) <= 1, `${floodCalls(file)} of the flood's checkpoints were saved`);
    } finally {
      await h.supervisor.close();
    }
  });

  it('close({ timeoutMs }) during the flood waits for none of it', async () => {
    const file = place();
    const store = sqlitePersistence({ file, tenantKey: (s) => (s as { tenant: string }).tenant });
    const h = await hostileSupervisor({ persistence: store, pool: { threads: 1 } });
    const desk = await h.supervisor.startAgent(intruderDesk, { scope, agentId: 'flood-2' });
    // The attack runs: its checkpoints are on their way (the tool never returns: it holds the thread).
    const attacking = nextEvent(h.supervisor, 'tool.execute.start', (e) => e.toolName === 'attack');
    const reply = desk.send(flood({ hold: true }));
    await attacking;
    const atClose = floodCalls(file);
    await h.supervisor.close({ timeoutMs: 100 });
    const landed = floodCalls(file) - atClose;
    assert.ok(landed <= 1, `${landed} of the flood's checkpoints were saved after close() was called`);
    // (The message ends however the shutdown ended it; it must not be left pending.)
    await reply.catch(() => undefined);
  });
});
