// Host death across a cluster, with the API host's SQLite store (turns are
// checkpointed): a worker host SIGKILLed mid-tool, drained by SIGTERM, or
// stopped (SIGSTOP) past its lock. The run goes on elsewhere from its last
// checkpoint; a side effect that started and never committed is not run again
// (the model gets ERR_INTERRUPTED) unless the tool is idempotent. Every side
// effect is a line in a file outside the system: none runs twice.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sqlitePersistence } from '@troupe/sqlite';
import { coordinator } from './cluster/agents.js';
import { type Cluster, hostOf, startCluster } from './cluster/cluster.js';

async function durable(hosts: number, host: Parameters<typeof startCluster>[1] = {}): Promise<Cluster> {
  const { mkdtempSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const directory = mkdtempSync(join(tmpdir(), 'troupe-death-'));
  return startCluster(hosts, { ...host, supervisor: { persistence: sqlitePersistence({ directory }) } });
}

/** Start `line` on the coordinator and wait until its tool started somewhere; the host it started on. */
async function started(c: Cluster, line: string, key: string) {
  const handle = await c.supervisor.startAgent(coordinator, { scope: c.scope, toolContext: c.toolContext });
  const reply = handle.send(line);
  const lines = await c.until((l) => l.some((x) => x.startsWith(`start ${key} `)));
  const on = hostOf(lines.find((x) => x.startsWith(`start ${key} `)) as string);
  const victim = c.hosts.find((h) => h.hostId === on);
  assert.ok(victim !== undefined);
  return { reply, victim };
}

describe('host death', () => {
  it('SIGKILL of a host mid-tool (not idempotent): the run finishes on the other host, the effect is not run again', async () => {
    const c = await durable(2);
    try {
      const { reply, victim } = await started(c, 'hold k1', 'k1');
      victim.kill('SIGKILL');
      const r = await reply;
      assert.equal(r.status, 'done', JSON.stringify(r));
      assert.match((r as { text: string }).text, /ERR_INTERRUPTED|interrupted/);
      assert.deepEqual(
        c.lines().filter((x) => x.startsWith('start k1 ')),
        [`start k1 ${victim.hostId}`],
        'started once, never again',
      );
    } finally {
      await c.close();
    }
  });

  it('SIGKILL of a host mid-tool (idempotent): the tool runs again on the other host and completes', async () => {
    const c = await durable(2);
    try {
      const { reply, victim } = await started(c, 'idem k2', 'k2');
      victim.kill('SIGKILL');
      const r = await reply;
      assert.equal(r.status, 'done', JSON.stringify(r));
      assert.match((r as { text: string }).text, /completed on host-/);
      const runs = c.lines().filter((x) => x.startsWith('start k2 '));
      assert.equal(runs.length, 2, runs.join('\n'));
      assert.notEqual(hostOf(runs[1] as string), victim.hostId, 'run again elsewhere');
    } finally {
      await c.close();
    }
  });

  it('SIGTERM drains a host: it hands its attempt back and exits 0; the run finishes elsewhere', async () => {
    const c = await durable(2);
    try {
      const { reply, victim } = await started(c, 'hold k3', 'k3');
      victim.kill('SIGTERM');
      assert.deepEqual(await victim.exited, { code: 0, signal: null }, victim.stderr());
      const r = await reply;
      assert.equal(r.status, 'done', JSON.stringify(r));
      assert.equal(c.lines().filter((x) => x.startsWith('start k3 ')).length, 1);
    } finally {
      await c.close();
    }
  });

  it('SIGSTOP of a host past its lock: the run goes on elsewhere; resumed, the stopped host does nothing twice', async () => {
    const c = await durable(2, { host: { lockMs: 1_000, leaseMs: 600 } });
    try {
      const { reply, victim } = await started(c, 'hold k4', 'k4');
      victim.kill('SIGSTOP');
      const r = await reply;
      victim.kill('SIGCONT');
      assert.equal(r.status, 'done', JSON.stringify(r));
      // Resumed, the stopped host learns it lost the attempt (lease, lock) and stops it; nothing runs twice.
      const more = c.supervisor.startAgent(coordinator, { scope: c.scope, toolContext: c.toolContext });
      const after = await (await more).send('effect k5');
      assert.equal(after.status, 'done');
      assert.equal(c.lines().filter((x) => x.startsWith('start k4 ')).length, 1);
      assert.equal(c.lines().filter((x) => x.startsWith('done k5 ')).length, 1);
    } finally {
      await c.close();
    }
  });
});
