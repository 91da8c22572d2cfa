// answer() and then, in the same tick, close({ timeoutMs }) or destroy(): the answer is being
// taken by the store (an asynchronous compare-and-set) when the shutdown begins. Hostile-tester
// finding: close() found nothing running, ended its drain at once and cleared its deadline, and the
// run the answer resumed ran on past it — close() never resolved (the resumed tool waits for its
// signal, which nothing aborted); destroy() had cancelled what ran already, so its wait for the
// tree never ended and the process exited 13; with a subagent, the parent's model ran a turn after
// destroy(). Now an answer being saved counts as running: close() drains it (the resumed run is
// cancelled at the deadline like any other), and after a shutdown's cancel nothing resumes (the
// answer is refused ERR_CLOSED; a store that keeps the conversation keeps the answer).
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { isTroupeError, type Request } from '@troupe/core';
import { sqlitePersistence } from '@troupe/sqlite';
import { type AgentReply, createSupervisor, MemoryPersistence, type PersistenceAdapter } from '@troupe/supervisor';
import { leadOfWaiter, waitsAfterAnswer } from '../fixtures/agents/answerWait.js';
import { tempDir } from '../persistence/sqliteFiles.js';

const dirs: { remove(): void }[] = [];
after(() => {
  for (const d of dirs) d.remove();
});
const scope = { org: 'acme' };

const stores: [string, () => PersistenceAdapter][] = [
  ['the memory store', () => new MemoryPersistence()],
  [
    'SQLite',
    () => {
      const d = tempDir('answer-shutdown');
      dirs.push(d);
      return sqlitePersistence({ file: join(d.dir, 'troupe.db') });
    },
  ],
];

for (const [storeName, makeStore] of stores) {
  describe(`answer() then a shutdown in the same tick (${storeName})`, () => {
    for (const [where, agent] of [
      ["a parent agent's own tool", waitsAfterAnswer],
      ["a subagent's tool (a worker)", leadOfWaiter],
    ] as const) {
      for (const how of ['close', 'destroy'] as const) {
        it(`${where}, then ${how}(): the answer settles, ${how}() resolves, nothing runs after it`, {
          timeout: 20_000,
        }, async () => {
          const supervisor = createSupervisor({ pool: { threads: 1, graceMs: 100 }, persistence: makeStore() });
          const handle = await supervisor.startAgent(agent, { scope });
          const first = await handle.send('go');
          assert.equal(first.status, 'suspended');
          const request = (first as { request: Request }).request;
          let stopped = false;
          const late: string[] = [];
          for (const name of ['model.start', 'tool.execute.start', 'agent.done', 'subagent.done'] as const) {
            supervisor.on(name, () => {
              if (stopped) late.push(name);
            });
          }
          const answered: Promise<AgentReply | Error> = supervisor
            .answer(request.id, { ok: true })
            .catch((error: Error) => error);
          await (how === 'close' ? supervisor.close({ timeoutMs: 50 }) : supervisor.destroy());
          stopped = true;
          const outcome = await answered;
          // Resumed and then cancelled by the shutdown, or refused because the shutdown came first.
          const settled =
            outcome instanceof Error
              ? isTroupeError(outcome, 'ERR_CLOSED')
                ? 'ERR_CLOSED'
                : `${outcome.name}: ${outcome.message}`
              : outcome.status === 'cancelled'
                ? `cancelled (${outcome.reason})`
                : outcome.status;
          assert.ok(
            settled === 'ERR_CLOSED' || settled === 'cancelled (shutdown)',
            `the answer settled ${settled}: a run must not finish after its supervisor shut down`,
          );
          await new Promise((resolve) => setImmediate(resolve));
          assert.deepEqual(late, [], 'events after the shutdown resolved');
          assert.equal(supervisor.stats().pool.running, 0);
        });
      }
    }
  });
}
