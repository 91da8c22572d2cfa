// Issue 11, item 2: authority comes from the supervisor, never from the
// worker. A host call is served only for a capability the supervisor issued
// to the run in flight on the very thread the call came from; a forged, a
// stolen (another thread's) or a stale capability is refused; ids a worker
// writes into a payload are never used.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CAPABILITY_LENGTH, HostOp } from '@troupe/core/internal';
import { mintCapability } from '@troupe/supervisor/internal';
import { echo } from '../fixtures/agents/basic.js';
import { Board, intruder } from '../fixtures/agents/hostile.js';
import { changed, type Hostile, hostileSupervisor, newBoard, processFaults } from './hostileSupervisor.js';

const SEQ = 1_000_000_001;

describe('authority: capabilities the supervisor issued, on the thread it issued them to', () => {
  let h: Hostile;
  before(async () => {
    h = await hostileSupervisor({ pool: { threads: 2 } });
  });
  after(async () => {
    await h.supervisor.destroy();
  });

  it('refuses a capability it never issued and recycles the worker', async () => {
    const from = h.refused.length;
    const outcome = await h.supervisor.spawn(intruder, {
      input: JSON.stringify({
        tool: 'attack',
        args: {
          on: 'host',
          message: [HostOp.approve, SEQ, 'A'.repeat(24), { toolName: 'drop_table', toolCallId: 'c', arguments: {} }],
          hold: true,
        },
      }),
      scope: { tenant: 'forger' },
      timeoutMs: 20_000,
    });
    assert.equal(outcome.status, 'crashed');
    const refusal = h.refused.slice(from).find((r) => /did not give this thread/.test(r.reason));
    assert.ok(refusal?.recycled, 'refused, and the thread recycled');
    assert.equal(refusal.agentId, undefined, 'a forged capability names no run');
    assert.equal(
      h.approvals.some((a) => a.toolName === 'drop_table'),
      false,
    );
  });

  it('refuses the capability of a run on another thread; that run is untouched and finishes', async () => {
    const board = newBoard();
    const from = h.refused.length;
    // The victim leaks its capability to the board, then holds its thread.
    const victim = h.supervisor.spawn(intruder, {
      input: JSON.stringify({ tool: 'stash' }),
      scope: { tenant: 'victim' },
      toolContext: { board },
    });
    await changed(board, Board.stashed);
    // The thief runs on the other thread (the victim's is held) and presents it.
    const thief = await h.supervisor.spawn(intruder, {
      input: JSON.stringify({ tool: 'present', args: { from: 'board', toolName: 'drop_table' } }),
      scope: { tenant: 'thief' },
      toolContext: { board },
      timeoutMs: 20_000,
    });
    assert.equal(thief.status, 'crashed', 'the thief was recycled');
    const refusal = h.refused.slice(from).find((r) => /did not give this thread/.test(r.reason));
    assert.ok(refusal?.recycled);
    assert.equal(refusal.agentId, undefined, 'a stolen capability is not resolved to its run');
    Atomics.store(board, Board.release, 1);
    Atomics.notify(board, Board.release);
    const v = await victim;
    assert.equal(v.status, 'done');
    assert.equal(v.status === 'done' && v.result, 'released');
    assert.equal(refusal.threadId === h.recycled.at(-1)?.threadId, true);
    // The handler was never asked anything in the victim's name but its own bait.
    assert.deepEqual(
      h.approvals.filter((a) => a.agentId === v.agentId).map((a) => a.toolName),
      ['bait'],
    );
    assert.equal(
      h.approvals.some((a) => a.toolCallId === 'stolen-call'),
      false,
    );
  });

  it('an approval is asked in the name of the run the capability names, whatever the payload claims', async () => {
    const claims = {
      toolName: 'bait',
      toolCallId: 'claims',
      arguments: {},
      agentId: 'agent_victim',
      parentAgentId: 'agent_boss',
      scope: { tenant: 'someone-else', role: 'admin' },
    };
    const outcome = await h.supervisor.spawn(intruder, {
      input: JSON.stringify({
        tool: 'attack',
        args: { on: 'host', message: [HostOp.approve, SEQ, '$cap', claims], reply: SEQ },
      }),
      scope: { tenant: 'claimant', role: 'user' },
    });
    assert.equal(outcome.status, 'done');
    const asked = h.approvals.find((a) => a.toolCallId === 'claims');
    assert.ok(asked);
    assert.equal(asked.agentId, outcome.agentId);
    assert.equal(asked.parentAgentId, undefined);
    assert.deepEqual(asked.scope, { tenant: 'claimant', role: 'user' });
  });
});

describe('authority: the capability of a run that ended on another thread', () => {
  let h: Hostile;
  before(async () => {
    // Its own supervisor: two threads, both up (another test's recycled thread would put the thief
    // on the victim's thread, where the capability is merely stale).
    h = await hostileSupervisor({ pool: { threads: 2 } });
    await h.supervisor.pool.ready();
  });
  after(async () => {
    await h.supervisor.destroy();
  });

  it('refuses the capability of a run that ended on another thread as never given to this one, and recycles', async () => {
    // The victim leaks its capability and holds thread A; the thief starts on thread B and waits.
    const board = newBoard();
    const victim = h.supervisor.spawn(intruder, {
      input: JSON.stringify({ tool: 'stash' }),
      scope: { tenant: 'victim' },
      toolContext: { board },
    });
    await changed(board, Board.stashed);
    const thief = h.supervisor.spawn(intruder, {
      input: JSON.stringify({ tool: 'present', args: { from: 'board', toolName: 'drop_table', wait: true } }),
      scope: { tenant: 'thief' },
      toolContext: { board },
      timeoutMs: 20_000,
    });
    Atomics.store(board, Board.release, 1);
    Atomics.notify(board, Board.release);
    const v = await victim;
    assert.equal(v.status, 'done');
    // The victim has ended: its capability, presented from thread B, was never thread B's.
    const from = h.refused.length;
    Atomics.store(board, Board.go, 1);
    Atomics.notify(board, Board.go);
    const t = await thief;
    assert.equal(
      t.status,
      'crashed',
      `the thief was recycled: ${JSON.stringify(t)} ${JSON.stringify(h.refused.slice(from))}`,
    );
    const refusal = h.refused.slice(from).find((r) => /did not give this thread/.test(r.reason));
    assert.ok(refusal?.recycled, `refused and recycled: ${JSON.stringify(h.refused.slice(from))}`);
    assert.equal(refusal.agentId, undefined, 'the event does not name the victim');
    assert.equal(
      h.approvals.some((a) => a.toolCallId === 'stolen-call'),
      false,
    );
  });
});

describe('authority: a stale capability (an earlier run on the same thread)', () => {
  it('is refused with ERR_HOST_REFUSED, without recycling; the handler is not asked', async () => {
    const h = await hostileSupervisor({ pool: { threads: 1 } });
    try {
      // The first run on the thread calls bait (its capability goes by the realm's patch) and ends.
      const first = await h.supervisor.spawn(intruder, {
        input: JSON.stringify({
          tool: 'attack',
          args: { on: 'host', message: [HostOp.events, 0, '$cap', [['t', 'agent.turn', {}]]], sync: true },
        }),
        scope: { tenant: 'first' },
      });
      assert.equal(first.status, 'done');
      const from = h.refused.length;
      const second = await h.supervisor.spawn(intruder, {
        input: JSON.stringify({ tool: 'present', args: { from: 'realm', toolName: 'drop_table' } }),
        scope: { tenant: 'second' },
      });
      assert.equal(second.status, 'done');
      const reply = JSON.parse(second.status === 'done' ? second.result : 'null') as [number, number, { code: string }];
      assert.equal(reply[1], 0);
      assert.equal(reply[2].code, 'ERR_HOST_REFUSED');
      const refusal = h.refused.slice(from);
      assert.equal(refusal.length, 1);
      assert.match(refusal[0]?.reason ?? '', /has ended/);
      assert.equal(refusal[0]?.recycled, false);
      assert.equal(refusal[0]?.agentId, first.agentId, 'the event names the ended run it named');
      assert.equal(h.recycled.length, 0);
      assert.equal(
        h.approvals.some((a) => a.toolCallId === 'stolen-call'),
        false,
      );
      const ok = await h.supervisor.spawn(echo, { input: 'after', scope: { tenant: 'third' } });
      assert.equal(ok.status, 'done');
      assert.deepEqual(processFaults.uncaught, []);
      assert.deepEqual(processFaults.unhandled, []);
    } finally {
      await h.supervisor.destroy();
    }
  });
});

describe('authority: capabilities are unguessable', () => {
  it('are 24 base64url characters (144 random bits), none repeated across many refills of the random pool', () => {
    const seen = new Set<string>();
    // 227 capabilities per refill of the pool: this crosses ~440 refills.
    const n = 100_000;
    const counts = new Map<string, number>();
    for (let i = 0; i < n; i++) {
      const c = mintCapability();
      assert.equal(c.length, CAPABILITY_LENGTH);
      assert.match(c, /^[A-Za-z0-9_-]{24}$/);
      seen.add(c);
      for (const ch of c) counts.set(ch, (counts.get(ch) ?? 0) + 1);
    }
    assert.equal(seen.size, n, 'a capability was minted twice');
    // Every one of the 64 characters turns up, each near 1/64 of 2.4 million draws (±10 %, ~25 standard deviations).
    assert.equal(counts.size, 64);
    const expected = (n * CAPABILITY_LENGTH) / 64;
    for (const [ch, count] of counts) {
      assert.ok(
        Math.abs(count - expected) < expected * 0.1,
        `character ${ch} drawn ${count} times, expected ~${expected}`,
      );
    }
  });
});
