// An approval asked before a restart and answered yes after it runs the call it was asked
// about, pre-approved, once — without asking the new process's handler again — because the
// store keeps the call the approval is about (RequestOpening.approvedCall), not only a flag.
// (A yes pre-approves only that call: see security/approvalSwap.test.ts for a swapped one.)
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type { ApprovalHandler, Request } from '@troupe/core';
import { sqlitePersistence } from '@troupe/sqlite';
import { createSupervisor } from '@troupe/supervisor';
import { admin, lead } from '../fixtures/agents/hitl.js';
import { tempDir } from './sqliteFiles.js';

const dirs: { remove(): void }[] = [];
after(() => {
  for (const d of dirs) d.remove();
});
const tenantKey = (s: unknown) => (s as { org: string }).org;
const scope = { org: 'acme', userId: 'ops' };

function open(file: string, approval: ApprovalHandler) {
  return createSupervisor({
    agents: [lead, admin],
    persistence: sqlitePersistence({ file, tenantKey }),
    approval,
    pool: { threads: 1, graceMs: 100 },
  });
}

describe('an approval across a restart', () => {
  for (const [label, agent, message] of [
    ["the parent's own tool", admin, 'drop it'],
    ["a subagent's tool (depth 2)", lead, 'admin: drop it'],
  ] as const) {
    it(`${label}: asked before, approved after, runs once and is not asked again`, async () => {
      const d = tempDir('approval-restart');
      dirs.push(d);
      const file = join(d.dir, 'troupe.sqlite');
      const runs = new Int32Array(new SharedArrayBuffer(12));
      const a = open(file, () => ({ decision: 'ask', prompt: 'Drop the users table?' }));
      const handle = await a.startAgent(agent, { scope, agentId: 'ops-1', toolContext: { runs } });
      const reply = await handle.send(message);
      assert.equal(reply.status, 'suspended', JSON.stringify(reply));
      const request = (reply as { request: Request }).request;
      assert.equal(request.kind, 'approval');
      await a.close();

      let askedAgain = 0;
      const b = open(file, () => {
        askedAgain++;
        return { decision: 'reject', reason: 'asked again after the restart' };
      });
      try {
        const done = await b.answer(request.id, { ok: true }, { scope, toolContext: { runs } });
        assert.equal(done.status, 'done', JSON.stringify(done));
        assert.match(done.status === 'done' ? done.text : '', /dropped users/);
        assert.equal(askedAgain, 0, 'the new process asked its handler about a call a person approved');
        assert.equal(Atomics.load(runs, 2), 1, 'drop_table ran once');
      } finally {
        await b.close();
      }
    });
  }
});
