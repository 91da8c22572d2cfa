// Found while building the example daemon (issue 13 items 7-8), fixed since: an answer under another
// tenant's scope, and a closed supervisor holding its agents.
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

describe('supervisor.answer and tenants', () => {
  // 1. answer(id, answer, { scope }) checks the tenant only when it has to restore the conversation
  //    from the store (Supervisor.#restoreFor). When the request is open in this supervisor
  //    (#tree.hasOpenRequest), the scope is ignored: another tenant answers it, and the run goes on
  //    with the original caller's scope. Seen: reply.status 'done', text "released api to evil for alice".
  //    listRequests({ org: 'evil' }) correctly lists nothing, so a host that trusts answer() to
  //    enforce the tenant (as the issue says: "nothing saved under one tenant key can be ... answered
  //    under another") is open to it. The example daemon works around it by looking the request up
  //    with store.getRequest(scope, id) first (404 when it is not the caller's tenant's).
  it('a request open in this supervisor cannot be answered under another tenant’s scope', async () => {
    const d = tempDir('tenant-answer');
    dirs.push(d);
    const store = sqlitePersistence({ file: join(d.dir, 't.sqlite'), tenantKey: (s) => (s as { org: string }).org });
    const supervisor = createSupervisor({ agents: [office], persistence: store, pool: { threads: 2 } });
    const agent = await supervisor.startAgent(office, { scope: { org: 'acme', userId: 'alice' }, agentId: 'o1' });
    const reply = await agent.send('release');
    assert.equal(reply.status, 'suspended');
    const id = (reply as { request: { id: string } }).request.id;
    const evil = { org: 'evil', userId: 'mallory' };
    assert.equal((await supervisor.listRequests(evil)).items.length, 0);
    await assert.rejects(supervisor.answer(id, { ok: true, data: { env: 'evil' } }, { scope: evil }), (e) =>
      isTroupeError(e, 'ERR_UNKNOWN_REQUEST'),
    );
    await supervisor.close();
  });
});

describe('a closed supervisor lets go of its agents', () => {
  // 3. After close() resolves, the supervisor stays reachable for 30 s: piscina's close() races the
  //    pool flush against an uncancelled `timers/promises.setTimeout(closeTimeout = 30000)`, whose
  //    promise keeps the Piscina alive; from it ThreadPool.balancer (our loadBalancer closure) →
  //    WorkerPool (#options.onHostPort) → RunTree (#events) → Supervisor → #idleAgents (a Set that
  //    close() does not clear; it clears #agents only) → every idle ParentAgent with its state.
  //    Seen with a heap snapshot's retainer path, and as heap: 5,000 idle 10-message conversations
  //    (~10 MiB) still held 25 s after close(), gone at 32 s. A daemon that closes and reopens a
  //    supervisor (tests, benches, a reload) carries the old one's conversations for that long.
  //    Clearing #idleAgents / #released on close and destroy (and/or piscina's closeTimeout) fixes it.
  it('no agent is reachable once close() resolved and the host dropped its handles', async () => {
    const { setFlagsFromString } = await import('node:v8');
    const { runInNewContext } = await import('node:vm');
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const supervisor = createSupervisor({ agents: [office], pool: { threads: 1 } });
    let weak: WeakRef<object> | undefined;
    await (async () => {
      const agent = await supervisor.startAgent(office, { scope: { org: 'acme' }, agentId: 'idle-1' });
      assert.equal((await agent.send('hello')).status, 'done');
      weak = new WeakRef(agent);
    })();
    await supervisor.close();
    for (let i = 0; i < 5; i++) {
      gc();
      await new Promise((resolve) => setImmediate(resolve));
    }
    assert.equal(weak?.deref(), undefined, 'nothing of the closed supervisor holds the agent');
  });
});
