// Tenants through the supervisor API on one SQLite file. The store keeps every row under the
// tenant key, so two tenants may each have a conversation whose agent is called `support`. The
// supervisor holds agents by id only, and answer(id, answer, { scope }) skips restoring a
// request's conversation when *any* agent of that id is held (Supervisor.#restoreFor:
// `if (this.agent(record.agentId) !== undefined) return`), whoever's it is.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { isTroupeError } from '@troupe/core';
import { sqlitePersistence } from '@troupe/sqlite';
import { createSupervisor } from '@troupe/supervisor';
import { office } from '../fixtures/agents/durable.js';
import { tempDir } from './sqliteFiles.js';

const dirs: { remove(): void }[] = [];
after(() => {
  for (const d of dirs) d.remove();
});

const acme = { org: 'acme', userId: 'alice' };
const globex = { org: 'globex', userId: 'bob' };

function opener(file: string) {
  return () =>
    createSupervisor({
      agents: [office],
      pool: { threads: 2 },
      persistence: sqlitePersistence({ file, tenantKey: (s) => (s as { org: string }).org }),
    });
}

describe('tenants with the same agent id in one supervisor', () => {
  it('a tenant’s open request, listed for it, is refused with ERR_AGENT_ID_IN_USE while another tenant’s agent of the same id is held, and answerable once it is stopped', async () => {
    const d = tempDir('tenant-ids');
    dirs.push(d);
    const open = opener(join(d.dir, 't.sqlite'));

    const first = open();
    const theirs = await first.startAgent(office, { scope: globex, agentId: 'support' });
    const asked = await theirs.send('release');
    assert.equal(asked.status, 'suspended');
    const id = (asked as { request: { id: string } }).request.id;
    await first.close();

    const second = open();
    try {
      // acme's own conversation with an agent of the same name, held (idle) in this process.
      const mine = await second.startAgent(office, { scope: acme, agentId: 'support' });
      assert.equal((await mine.send('hello')).status, 'done');
      assert.deepEqual(
        (await second.listRequests(globex)).items.map((r) => r.request.id),
        [id],
        'globex sees its open request',
      );
      assert.deepEqual((await second.listRequests(acme)).items, [], 'acme does not');

      // Agent ids are one namespace per supervisor: the answer must not reach acme's agent, nor
      // be refused as unknown. It is refused saying why and what to do, and the request stays open.
      const refused = await second
        .answer(id, { ok: true, data: { env: 'prod' } }, { scope: globex })
        .catch((error: unknown) => error);
      assert.ok(isTroupeError(refused, 'ERR_AGENT_ID_IN_USE'), `got ${String(refused)}`);
      assert.match((refused as Error).message, /stopAgent\("support"\)/);
      assert.deepEqual(
        (await second.listRequests(globex)).items.map((r) => r.request.id),
        [id],
        'the request stays open',
      );
      assert.equal(
        mine.snapshot().messages.some((m) => m.content === 'release'),
        false,
        "acme's conversation of the same id is still acme's",
      );
      // Starting globex's conversation under the held id says the same.
      await assert.rejects(second.startAgent(office, { scope: globex, agentId: 'support' }), /unique per supervisor/);
      // With acme's agent stopped, globex's answer restores its conversation and resumes it.
      await second.stopAgent('support');
      const reply = await second.answer(id, { ok: true, data: { env: 'prod' } }, { scope: globex });
      assert.equal((reply as { status: string }).status, 'done');
      assert.match((reply as { text: string }).text, /released api to prod for bob/);
    } finally {
      await second.close();
    }
  });

  it('another tenant’s scope answering a request held in memory is refused (also near-miss tenant keys); the owner’s answer still works (holds)', async () => {
    const d = tempDir('tenant-held');
    dirs.push(d);
    const supervisor = opener(join(d.dir, 't.sqlite'))();
    try {
      const agent = await supervisor.startAgent(office, { scope: acme, agentId: 'o1' });
      const asked = await agent.send('release');
      const id = (asked as { request: { id: string } }).request.id;
      for (const scope of [globex, { org: 'acme ', userId: 'alice' }, { org: 'ACME', userId: 'alice' }]) {
        await assert.rejects(supervisor.answer(id, { ok: true, data: { env: 'evil' } }, { scope }), (e) =>
          isTroupeError(e, 'ERR_UNKNOWN_REQUEST'),
        );
      }
      assert.deepEqual(
        supervisor.pendingRequests().map((p) => p.request.id),
        [id],
      );
      const reply = await supervisor.answer(id, { ok: true, data: { env: 'eu' } }, { scope: acme });
      assert.match((reply as { text: string }).text, /released api to eu for alice/);
    } finally {
      await supervisor.close();
    }
  });
});
