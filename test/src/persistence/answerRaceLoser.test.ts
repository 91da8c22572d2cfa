// Issue 13 item 1 / contract 6: an answer is taken exactly once across processes — and the
// supervisor that lost the compare-and-set must not go on presenting the request as waiting for
// a person: `pendingRequests()` is "requests waiting for a person in this supervisor", and the
// agent it restored is not suspended on it any more (another process resumed and finished it).
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { isTroupeError, type Request } from '@troupe/core';
import { sqlitePersistence } from '@troupe/sqlite';
import { createSupervisor } from '@troupe/supervisor';
import { office } from '../fixtures/agents/durable.js';
import { tempDir } from './sqliteFiles.js';

const dirs: { remove(): void }[] = [];
after(() => {
  for (const d of dirs) d.remove();
});
const tenantKey = (s: unknown) => (s as { org: string }).org;
const alice = { org: 'acme', userId: 'alice' };

function open(file: string) {
  const store = sqlitePersistence({ file, tenantKey });
  return createSupervisor({ agents: [office], persistence: store, pool: { threads: 1, graceMs: 100 } });
}

describe('two supervisors on one file: the one whose answer lost', () => {
  for (const [label, options] of [
    ['answered with the caller’s scope', { scope: alice }],
    ['answered without a scope', {}],
  ] as const) {
    it(`${label}: drops the request it restored once the store says another process took the answer`, async () => {
      const d = tempDir('race-loser');
      dirs.push(d);
      const file = join(d.dir, 'troupe.sqlite');
      const a = open(file);
      const b = open(file);
      try {
        const agent = await a.startAgent(office, { scope: alice, agentId: 'office-r' });
        const reply = await agent.send('release');
        assert.equal(reply.status, 'suspended');
        const request = (reply as { request: Request }).request;
        // B restores the conversation (a daemon's second replica, or a restart that raced the first).
        const restored = await b.startAgent(office, { scope: alice, agentId: 'office-r' });
        assert.equal(restored.status, 'suspended');
        assert.deepEqual(
          b.pendingRequests().map((p) => p.request.id),
          [request.id],
        );
        // A takes the answer and finishes the message.
        const done = await a.answer(request.id, { ok: true, data: { env: 'a' } });
        assert.equal(done.status, 'done');
        // B's answer is refused, exactly once semantics hold...
        await assert.rejects(b.answer(request.id, { ok: true, data: { env: 'b' } }, options), (e) =>
          isTroupeError(e, 'ERR_REQUEST_ALREADY_ANSWERED'),
        );
        // ...but B must not keep listing it as waiting for a person, nor keep its agent suspended on it.
        assert.deepEqual(
          b.pendingRequests().map((p) => p.request.id),
          [],
          'B still lists a request the store says was answered',
        );
        assert.notEqual(restored.status, 'suspended', 'B’s agent is still suspended on an answered request');
        // The stale copy is let go without writing; a message to it is refused, saying what to do...
        await assert.rejects(restored.send('again'), (e) => isTroupeError(e, 'ERR_AGENT_STOPPED'));
        // ...and starting the conversation again in B loads what A saved.
        const again = await b.startAgent(office, { scope: alice, agentId: 'office-r' });
        assert.equal(again.status, 'idle');
        assert.deepEqual(again.snapshot().messages.slice(-1), agent.snapshot().messages.slice(-1));
      } finally {
        await b.close();
        await a.close();
      }
    });
  }
});
