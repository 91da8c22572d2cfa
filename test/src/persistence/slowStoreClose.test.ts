// A store that answers slowly (an integrator's adapter over the network, say):
// close() cuts a running message whose subagents are mid-tool, and each cut
// run's end is written through the store. Every such write must reach the
// store before close() closes it — none may be issued to, or still be running
// in, a closed store (it would reject with ERR_CLOSED: the run's row stays
// `running`, and the next process reports it interrupted).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { sqlitePersistence } from '@troupe/sqlite';
import { createSupervisor, type PersistenceAdapter } from '@troupe/supervisor';
import { type LeadPlan, lead } from '../fuzz/agents.js';

const SCOPE = { tenantId: 't1', userId: 'u1' };

// Gives the event loop `turns` macrotask turns: the store answers later, not after a timer.
async function later(turns: number): Promise<void> {
  for (let i = 0; i < turns; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

/** `inner`, answering every call a few event-loop turns late; records calls that meet a closed store. */
function slowStore(inner: PersistenceAdapter): { store: PersistenceAdapter; late: string[] } {
  const late: string[] = [];
  let closing = false;
  const store = new Proxy(inner, {
    get(target, key, receiver) {
      const value = Reflect.get(target, key, receiver);
      if (typeof value !== 'function') return value;
      if (key === 'close') {
        return async () => {
          closing = true;
          await (value as () => Promise<void>).call(target);
        };
      }
      return async (...args: unknown[]) => {
        if (closing) late.push(`${String(key)} called after close()`);
        await later(2_000);
        const result = await (value as (...a: unknown[]) => unknown).apply(target, args);
        if (closing) late.push(`${String(key)} answered after close()`);
        return result;
      };
    },
  });
  return { store, late };
}

const PLAN: LeadPlan = {
  n: 'm1',
  u: 1,
  // Two subagents crunching (polling isCancelled()) for a long while: both are mid-tool at the stop.
  items: [
    { k: 'crunch', n: 'c1', u: 1, iters: 10_000_000 },
    { k: 'crunch', n: 'c2', u: 1, iters: 10_000_000 },
  ],
  own: 'none',
};

/** Runs PLAN on a slow SQLite store, stops the supervisor mid-tool, and returns what the next process sees. */
async function stopMidTool(
  stop: 'close' | 'destroy',
): Promise<{ reply: string; late: string[]; failed: string[]; next: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'troupe-slowstore-'));
  const file = join(dir, 'slow.sqlite');
  try {
    const { store, late } = slowStore(sqlitePersistence({ file }));
    const supervisor = createSupervisor({ agents: [lead], pool: { threads: 2, graceMs: 2_000 }, persistence: store });
    const failed: string[] = [];
    supervisor.on('persistence.failed', (e) => failed.push(`${e.runId}: ${e.error.message}`));
    const agent = await supervisor.startAgent(lead, { scope: SCOPE, agentId: 'a-1' });
    let started = 0;
    const bothStarted = new Promise<void>((resolve) => {
      supervisor.on('tool.execute.start', (e) => {
        if (e.toolName === 'crunch' && ++started === 2) resolve();
      });
    });
    const replied = agent.send(JSON.stringify(PLAN));
    await bothStarted;
    if (stop === 'close') await supervisor.close({ timeoutMs: 0 });
    else await supervisor.destroy();
    const reply = (await replied).status;
    const next = createSupervisor({ agents: [lead], pool: { threads: 1 }, persistence: sqlitePersistence({ file }) });
    try {
      const again = await next.startAgent(lead, { scope: SCOPE, agentId: 'a-1' });
      return { reply, late, failed, next: again.status };
    } finally {
      await next.close({ timeoutMs: 1_000 });
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('stopping a supervisor whose store answers slowly', () => {
  it('close() writes every cut run before the store closes', async () => {
    const { reply, late, failed, next } = await stopMidTool('close');
    assert.equal(reply, 'cancelled');
    assert.deepEqual(late, [], 'no write may meet a closed store');
    assert.deepEqual(failed, [], 'no write failed');
    assert.equal(next, 'idle', 'the cut message is saved cancelled, not left to come back interrupted');
  });

  it('destroy() leaves the message saved as it was, and nothing meets a closed store', async () => {
    const { reply, late, failed, next } = await stopMidTool('destroy');
    assert.equal(reply, 'cancelled');
    assert.deepEqual(late, [], 'no write may meet a closed store');
    assert.deepEqual(failed, [], 'no write failed');
    assert.equal(next, 'interrupted', 'destroy() leaves a running message to come back interrupted');
  });
});
