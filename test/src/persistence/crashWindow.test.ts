// Issue 13 items 5 and 6, one window the random crash test rarely lands in: a request is
// answered (the answer taken in the store), the tool that asked re-runs and does its side
// effect, and the process dies before the result is saved. A new process must not re-run the
// (not idempotent) tool silently — the model gets an "interrupted" error result — and the
// conversation must come back answerable/resumable, not stuck.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { Request } from '@troupe/core';
import { sqlitePersistence } from '@troupe/sqlite';
import { type AgentReply, createSupervisor } from '@troupe/supervisor';
import { startProcess } from '../examples/startProcess.js';
import { depot } from '../fixtures/agents/crashWindow.js';
import { tempDir } from './sqliteFiles.js';

const CHILD = fileURLToPath(new URL('./crashWindowChild.js', import.meta.url));
const tenantKey = (s: unknown) => (s as { org: string }).org;
const alice = { org: 'acme', userId: 'alice' };
const dirs: { remove(): void }[] = [];
after(() => {
  for (const d of dirs) d.remove();
});

function open(file: string) {
  const store = sqlitePersistence({ file, tenantKey });
  return {
    store,
    supervisor: createSupervisor({ agents: [depot], persistence: store, pool: { threads: 1, graceMs: 100 } }),
  };
}

async function killedInsideTheReRun(message: string) {
  const d = tempDir('window');
  dirs.push(d);
  const file = join(d.dir, 'troupe.sqlite');
  const effects = join(d.dir, 'effects.log');
  const a = open(file);
  const agent = await a.supervisor.startAgent(depot, { scope: alice, agentId: 'depot-1', toolContext: { effects } });
  const reply = await agent.send(message);
  assert.equal(reply.status, 'suspended', JSON.stringify(reply));
  const request = (reply as { request: Request }).request;
  await a.supervisor.close();

  const child = startProcess(CHILD, { WINDOW_FILE: file, WINDOW_EFFECTS: effects, WINDOW_REQUEST: request.id });
  await Promise.race([child.line(/^in-effect$/), child.exited]);
  assert.ok(child.lines.includes('in-effect'), `the child did not reach the side effect: ${child.stderr()}`);
  child.child.kill('SIGKILL');
  assert.equal((await child.exited).signal, 'SIGKILL');
  const ships = () =>
    existsSync(effects)
      ? readFileSync(effects, 'utf8')
          .split('\n')
          .filter((l) => l.startsWith('ship'))
      : [];
  assert.equal(ships().length, 1, 'the killed process shipped once');
  return { file, effects, ships, request };
}

describe('killed after an answer was taken, inside the re-run tool’s side effect', () => {
  for (const [label, message] of [
    ['the parent’s own tool', 'root'],
    ['a subagent’s tool (one level down)', 'deep'],
  ] as const) {
    it(`${label}: restored, it is not stuck and the tool is not re-run silently`, async () => {
      const { file, effects, ships, request } = await killedInsideTheReRun(message);
      const b = open(file);
      try {
        const restored = await b.supervisor.startAgent(depot, {
          scope: alice,
          agentId: 'depot-1',
          toolContext: { effects },
        });
        // The run was mid-turn (its row is `running`, its answer taken): it must come back
        // `interrupted` (resumable) or resume on its own — never `idle`, its turn silently dropped.
        assert.ok(
          restored.status === 'interrupted' || restored.status === 'running',
          `restored ${restored.status}: the answered, mid-turn message was dropped (request ${request.id} is ${(await b.store.getRequest(alice, request.id))?.status}, nothing is open)`,
        );
        const final: AgentReply =
          restored.status === 'interrupted' ? await restored.resume() : await restored.send('status?');
        assert.notEqual(final.status, 'suspended', `stuck: ${JSON.stringify(final)}`);
        assert.equal(ships().length, 1, `the side effect ran again after the restart: ${ships().join(' | ')}`);
        const text = JSON.stringify(restored.snapshot().messages);
        assert.match(text, /ERR_INTERRUPTED|interrupted/, 'the model was told the ship call was interrupted');
      } finally {
        await b.supervisor.close();
      }
    });
  }
});
