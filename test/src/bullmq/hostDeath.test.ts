// Host death across a cluster, with the API host's SQLite store (turns are
// checkpointed): a worker host SIGKILLed mid-tool, drained by SIGTERM, or
// stopped (SIGSTOP) past its lock. The run goes on elsewhere from its last
// checkpoint; a side effect that started and never committed is not run again
// (the model gets ERR_INTERRUPTED) unless the tool is idempotent. Every side
// effect is a line in a file outside the system: none runs twice.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sqlitePersistence } from '@troupe/sqlite';
import { ChatServer, event, finishChunk, sse, startSse, textAnswer, textChunk } from '../openai/chatServer.js';
import { BASE_URL_VARIABLE, coordinator, streamer, worker } from './cluster/agents.js';
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

  it('SIGKILL of a host mid-model-stream: a direct spawn (nothing saved) runs again on the other host, its tool once', async () => {
    const server = await ChatServer.start();
    process.env[BASE_URL_VARIABLE] = server.baseURL;
    const c = await startCluster(2);
    try {
      let placedOn: string | undefined;
      c.supervisor.on('subagent.done', (e) => {
        placedOn = e.host;
      });
      server.script(
        // The first host's stream: one delta, then nothing (it dies reading it).
        (res) => {
          startSse(res);
          event(res, textChunk('Let me'));
        },
        // The run again, on the other host: the tool call, then the answer.
        sse([
          {
            choices: [
              {
                index: 0,
                delta: {
                  tool_calls: [{ index: 0, id: 'c1', function: { name: 'effect', arguments: '{"key":"m1"}' } }],
                },
              },
            ],
          },
          finishChunk('tool_calls'),
        ]),
        textAnswer('charged'),
      );
      const outcome = c.supervisor.spawn(streamer, { input: 'charge m1', scope: c.scope, toolContext: c.toolContext });
      const first = await server.request(1);
      const on = String(first.headers['x-troupe-host']);
      const victim = c.hosts.find((h) => h.hostId === on);
      assert.ok(victim !== undefined, on);
      victim.kill('SIGKILL');
      const r = await outcome;
      assert.equal(r.status, 'done', JSON.stringify(r));
      assert.equal(r.status === 'done' ? r.result : '', 'charged');
      await first.socketClosed;
      const other = c.hosts.find((h) => h !== victim)?.hostId;
      assert.equal((await server.request(2)).headers['x-troupe-host'], other, 'the model was asked again elsewhere');
      assert.deepEqual(
        c.lines().filter((l) => l.startsWith('done m1 ')),
        [`done m1 ${other}`],
        'the tool ran once',
      );
      assert.equal(placedOn, other, 'subagent.done names the host that ran it');
      assert.equal(c.transport.stats().requeued, 1);
    } finally {
      await c.close();
      delete process.env[BASE_URL_VARIABLE];
      await server.close();
    }
  });

  it('SIGKILL of a host mid-tool, a direct spawn (nothing saved): it ends crashed, the tool is not run again', async () => {
    const c = await startCluster(2);
    try {
      const outcome = c.supervisor.spawn(worker, { input: 'hold g1', scope: c.scope, toolContext: c.toolContext });
      const lines = await c.until((l) => l.some((x) => x.startsWith('start g1 ')));
      const on = hostOf(lines.find((x) => x.startsWith('start g1 ')) as string);
      c.hosts.find((h) => h.hostId === on)?.kill('SIGKILL');
      const r = await outcome;
      assert.equal(r.status, 'crashed', JSON.stringify(r));
      assert.match(r.status === 'crashed' ? r.error.message : '', /lost/);
      assert.deepEqual(
        c.lines().filter((l) => l.startsWith('start g1 ')),
        [`start g1 ${on}`],
      );
      assert.equal(c.transport.stats().requeued, 0);
    } finally {
      await c.close();
    }
  });
});
