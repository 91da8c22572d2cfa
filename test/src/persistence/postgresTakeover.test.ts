// Several API hosts on one PostgreSQL database, each a process with its own supervisor: liveness by
// lease on the database clock. A host killed (SIGKILL) mid-answer, inside a tool call, has its
// conversation taken over by another host within lease + 1 s (`interrupted`, then resumed, the
// tool not re-run); while the host lives, its conversation is refused elsewhere (ERR_CONVERSATION_BUSY),
// however long; a suspended conversation of a dead host is answered exactly once, also by two hosts
// racing; and no row holds the scope (a pg_dump of the database holds no scope value).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { isTroupeError } from '@troupe/core';
import { postgresPersistence } from '@troupe/postgres';
import { type AgentHandle, createSupervisor } from '@troupe/supervisor';
import { type RunningProcess, startProcess } from '../examples/startProcess.js';
import { depot } from '../fixtures/agents/crashWindow.js';
import { freshSchema, server } from './postgresStores.js';
import { tempDir } from './sqliteFiles.js';

const CHILD = fileURLToPath(new URL('./postgresHostChild.js', import.meta.url));
// Long enough that a host on a loaded machine renews it in time (it is renewed every third of it).
const LEASE_MS = 3000;
const SECRET = `scope-secret-${process.pid}-${Date.now()}`;
const scope = { org: 'acme', userId: 'host', secret: SECRET };
const schema = freshSchema('hosts');
const dir = tempDir('hosts');
const effects = join(dir.dir, 'effects.log');
const children: RunningProcess[] = [];
after(() => {
  for (const c of children) if (c.child.exitCode === null && c.child.signalCode === null) c.child.kill('SIGKILL');
  dir.remove();
});

async function host(action: string, arg: string): Promise<RunningProcess> {
  const s = await server();
  const child = startProcess(CHILD, {
    HOST_URL: s.url,
    HOST_SCHEMA: schema,
    HOST_LEASE_MS: String(LEASE_MS),
    HOST_EFFECTS: effects,
    HOST_SECRET: SECRET,
    HOST_ACTION: action,
    HOST_ARG: arg,
  });
  children.push(child);
  return child;
}

async function thisHost() {
  const s = await server();
  const store = await postgresPersistence({
    connectionString: s.url,
    schema,
    leaseMs: LEASE_MS,
    tenantKey: (x) => (x as { org: string }).org,
  });
  return { store, supervisor: createSupervisor({ agents: [depot], persistence: store, pool: { threads: 1 } }) };
}

const ships = () =>
  existsSync(effects)
    ? readFileSync(effects, 'utf8')
        .split('\n')
        .filter((l) => l.startsWith('ship'))
    : [];

/** The lease row of every owner but `except`, as the database clock sees it. */
async function leases(except: string[] = []): Promise<number[]> {
  const s = await server();
  const rows = (await s.sql(`SELECT owner_id, extract(epoch from lease_until) * 1000 AS until FROM ${schema}.owners`))
    .rows as { owner_id: string; until: string }[];
  return rows.filter((r) => !except.includes(r.owner_id)).map((r) => Number(r.until));
}

async function killed(child: RunningProcess): Promise<number> {
  child.child.kill('SIGKILL');
  const exit = await child.exited;
  assert.equal(exit.signal, 'SIGKILL', `the host ended before it was killed: ${child.stderr()}`);
  return performance.now();
}

describe('PostgresPersistence: several API hosts, liveness by lease', () => {
  it('a host killed inside a tool call of an answer: refused elsewhere while it lives, taken over within lease + 1 s after', async (t) => {
    const first = await host('suspend', 'depot-1');
    const asked = await Promise.race([first.line(/^suspended (\S+)$/), first.exited.then(() => undefined)]);
    assert.ok(asked !== undefined, `the first host did not suspend: ${first.stderr()}`);
    await killed(first);
    // Host A answers the question (restoring the conversation from the store) and is inside the
    // re-run tool, after its side effect, when it is killed.
    const a = await host('answer-and-hold', asked[1] as string);
    await Promise.race([a.line(/^in-effect$/), a.exited]);
    assert.ok(a.lines.includes('in-effect'), `host A did not reach the side effect: ${a.stderr()}`);
    const b = await thisHost();
    try {
      const busy = async () =>
        assert.rejects(
          b.supervisor.startAgent(depot, { scope, agentId: 'depot-1', toolContext: { effects } }),
          (e: unknown) => isTroupeError(e, 'ERR_CONVERSATION_BUSY'),
        );
      await busy();
      // Still refused once host A has renewed its lease past the one seen now: a live host keeps its
      // conversation however long it runs (the renewal is what is waited for, on the database clock).
      const seen = Math.max(0, ...(await leases()));
      for (let renewed = false; !renewed; ) renewed = (await leases()).some((l) => l > seen);
      await busy();

      const t0 = await killed(a);
      let restored: AgentHandle | undefined;
      let refusals = 0;
      while (restored === undefined) {
        try {
          restored = await b.supervisor.startAgent(depot, { scope, agentId: 'depot-1', toolContext: { effects } });
        } catch (error) {
          if (!isTroupeError(error, 'ERR_CONVERSATION_BUSY')) throw error;
          refusals++;
        }
      }
      const takeoverMs = performance.now() - t0;
      t.diagnostic(
        `taken over ${Math.round(takeoverMs)} ms after the kill (lease ${LEASE_MS} ms; ${refusals} refusals)`,
      );
      assert.ok(takeoverMs <= LEASE_MS + 1000, `taken over after ${takeoverMs} ms, over lease + 1 s`);
      assert.equal(restored.status, 'interrupted');
      const reply = await restored.resume();
      assert.equal(reply.status, 'done', JSON.stringify(reply));
      assert.match(JSON.stringify(restored.snapshot().messages), /ERR_INTERRUPTED|interrupted/);
      assert.equal(ships().length, 1, `the side effect ran again on the host that took over: ${ships().join(' | ')}`);
    } finally {
      await b.supervisor.close();
    }
  });

  it('a suspended conversation of a dead host: two hosts answer at once, exactly one resumes it', async () => {
    const before = ships().length;
    const a = await host('suspend', 'depot-2');
    const line = await Promise.race([a.line(/^suspended (\S+)$/), a.exited.then(() => undefined)]);
    assert.ok(line !== undefined, `host A did not suspend: ${a.stderr()}`);
    const requestId = line[1] as string;
    await killed(a);
    const racers = [await host('answer', requestId), await host('answer', requestId)];
    const outcomes = await Promise.all(
      racers.map(async (r) => {
        const exit = await r.exited;
        assert.equal(exit.code, 0, r.stderr());
        return r.lines.find((l) => l.startsWith('answered') || l.startsWith('refused')) ?? r.lines.join('|');
      }),
    );
    assert.equal(outcomes.filter((o) => o === 'answered done').length, 1, outcomes.join(', '));
    const refusal = outcomes.find((o) => o !== 'answered done') ?? '';
    assert.match(refusal, /^refused (ERR_REQUEST_ALREADY_ANSWERED|ERR_CONVERSATION_BUSY|ERR_STORE_FENCED)$/);
    assert.equal(ships().length, before + 1, 'the answered tool ran once');
    const b = await thisHost();
    try {
      assert.equal((await b.store.getRequest(scope, requestId))?.status, 'answered');
    } finally {
      await b.supervisor.close();
    }
  });

  it('two hosts send to one conversation at once: one wins, the other is fenced and writes nothing', async () => {
    const b = await thisHost();
    try {
      const mine = await b.supervisor.startAgent(depot, { scope, agentId: 'depot-3', toolContext: { effects } });
      assert.equal((await mine.send('hello')).status, 'done');
      const a = await host('send-on-signal', 'depot-3');
      await Promise.race([a.line(/^loaded$/), a.exited]);
      assert.ok(a.lines.includes('loaded'), a.stderr());
      // Both hold the conversation as saved (revision r); both send now.
      a.child.kill('SIGUSR2');
      const [theirs, ours] = await Promise.all([a.line(/^replied (.*)$/), mine.send('from B')]);
      const oursCode = ours.status === 'failed' ? (ours.error as { code?: string }).code : '-';
      const outcomes = [theirs[1] as string, `${ours.status} ${oursCode}`];
      assert.equal(outcomes.filter((o) => o === 'done -').length, 1, outcomes.join(', '));
      assert.match(outcomes.find((o) => o !== 'done -') ?? '', /^failed ERR_(STORE_FENCED|CONVERSATION_BUSY)$/);
      const said = (await b.store.loadMessages(scope, { agentId: mine.id, conversationId: 'depot-3' })).map(
        (m) => m.content,
      );
      const winner = outcomes[0] === 'done -' ? 'from A' : 'from B';
      const loser = winner === 'from A' ? 'from B' : 'from A';
      assert.ok(said.includes(winner) && !said.includes(loser), `the loser wrote: ${said.join(' | ')}`);
    } finally {
      await b.supervisor.close();
    }
  });

  it('no row holds the scope: a pg_dump of the database holds no scope value', async () => {
    const s = await server();
    const pgDump = join(s.bin, 'pg_dump');
    assert.ok(existsSync(pgDump), `pg_dump is needed (${pgDump}): apt-get install -y postgresql-client`);
    const dump = execFileSync(pgDump, ['--data-only', '--schema', schema, s.url], {
      encoding: 'utf8',
      maxBuffer: 1 << 28,
    });
    assert.match(dump, /depot-1/, 'the dump holds the conversations');
    assert.ok(!dump.includes(SECRET), 'the dump holds the scope’s secret');
    assert.ok(!dump.includes('"userId"'), 'the dump holds a scope field');
  });
});
