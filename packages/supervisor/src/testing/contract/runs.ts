import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type MakeStore, PersistenceFixtures, type TestScope } from '../PersistenceFixtures.js';

const { call, ctx, envelope, rejectsWith, request, run, withStore } = PersistenceFixtures;

/** Runs (RunTree nodes), fencing, interruption, tool calls, deletion and retention. */
export function contractRuns(name: string, make: MakeStore, scope: TestScope): void {
  describe(`${name}: runs`, () => {
    it('loadRuns returns the conversation’s live runs (running, suspended), oldest first', async () => {
      await withStore(make, async (store) => {
        const c = ctx('c1');
        await store.commit(
          scope,
          {
            runs: [
              run(c, 'r-new', { status: 'suspended', updatedAt: 3 }),
              run(c, 'r-old', {
                status: 'running',
                updatedAt: 1,
                parentRunId: 'r-new',
                toolCallId: 'task-1',
                kind: 'subagent',
              }),
              run(c, 'r-done', { status: 'done', updatedAt: 2, outcome: { text: 'ok' } }),
            ],
          },
          c,
        );
        await store.commit(scope, { runs: [run(ctx('c2'), 'r-other')] }, ctx('c2'));
        const live = await store.loadRuns(scope, c);
        assert.deepEqual(
          live.map((r) => r.runId),
          ['r-old', 'r-new'],
        );
        assert.equal(live[0]?.parentRunId, 'r-new');
        assert.equal(live[0]?.toolCallId, 'task-1');
        assert.equal(live[0]?.kind, 'subagent');
      });
    });

    it('attempt fences: a lower attempt is refused and changes nothing; equal and higher are taken', async () => {
      await withStore(make, async (store) => {
        const c = ctx('c1');
        await store.commit(scope, { runs: [run(c, 'r1', { state: { v: 'first' } })] }, c); // the first attempt starts the conversation
        await store.commit(scope, { runs: [run(c, 'r1', { attempt: 2, state: { v: 'a' } })] }, c);
        await rejectsWith(
          store.commit(scope, { runs: [run(c, 'r1', { attempt: 1, state: { v: 'stale' } })] }, c),
          'ERR_STORE_FENCED',
          /attempt 2.*attempt 1 is stale/,
        );
        assert.deepEqual((await store.loadRuns(scope, c))[0]?.state, { v: 'a' });
        await store.commit(scope, { runs: [run(c, 'r1', { attempt: 2, state: { v: 'b' } })] }, c);
        await store.commit(scope, { runs: [run(c, 'r1', { attempt: 3, state: { v: 'c' } })] }, c);
        const [saved] = await store.loadRuns(scope, c);
        assert.deepEqual([saved?.attempt, saved?.state], [3, { v: 'c' }]);
      });
    });

    it('refuses an attempt that is not an integer ≥ 1', async () => {
      await withStore(make, async (store) => {
        const c = ctx('c1');
        await rejectsWith(
          store.commit(scope, { runs: [run(c, 'r1', { attempt: 0 })] }, c),
          'ERR_INVALID_ARGUMENT',
          /fencing/,
        );
      });
    });

    it('refuses to move a run to another conversation', async () => {
      await withStore(make, async (store) => {
        await store.commit(scope, { runs: [run(ctx('c1'), 'r1')] }, ctx('c1'));
        await rejectsWith(
          store.commit(scope, { runs: [run(ctx('c2'), 'r1')] }, ctx('c2')),
          'ERR_INVALID_ARGUMENT',
          /belongs to conversation c1/,
        );
      });
    });

    it("markInterrupted leaves the store's own running runs alone (they run in this process while it is open)", async () => {
      await withStore(make, async (store) => {
        const c = ctx('c1');
        await store.commit(
          scope,
          {
            runs: [
              run(c, 'r1'),
              run(c, 'r2', { status: 'suspended' }),
              run(c, 'r3', { status: 'done', updatedAt: 9_000 }),
            ],
          },
          c,
        );
        assert.deepEqual(await store.markInterrupted({ now: 5_000 }), []);
        assert.deepEqual(
          (await store.loadRuns(scope, c)).map((r) => [r.runId, r.status]),
          [
            ['r1', 'running'],
            ['r2', 'suspended'],
          ],
        );
        // Asked for, interrupted runs come too (none here); ended ones never.
        assert.deepEqual(
          (await store.loadRuns(scope, c, { interrupted: true })).map((r) => r.runId),
          ['r1', 'r2'],
        );
      });
    });
  });

  describe(`${name}: tool calls`, () => {
    it('a started call is returned by loadToolCalls until a commit marks it committed', async () => {
      await withStore(make, async (store) => {
        const c = ctx('c1');
        await store.startToolCalls(
          scope,
          [call('r1', 'k1'), call('r1', 'k2', { idempotent: true, startedAt: 2_000 })],
          c,
        );
        const started = await store.loadToolCalls(scope, 'r1');
        assert.deepEqual(
          started.map((t) => [t.toolCallId, t.status, t.idempotent, t.committedAt]),
          [
            ['k1', 'started', false, undefined],
            ['k2', 'started', true, undefined],
          ],
        );
        await store.commit(scope, { committedToolCalls: [{ runId: 'r1', toolCallId: 'k1', attempt: 1 }] }, c);
        assert.deepEqual(
          (await store.loadToolCalls(scope, 'r1')).map((t) => t.toolCallId),
          ['k2'],
        );
      });
    });

    it('each attempt of a call is its own record (a resumed call starts attempt 2)', async () => {
      await withStore(make, async (store) => {
        const c = ctx('c1');
        await store.startToolCalls(scope, [call('r1', 'k1')], c);
        await store.commit(scope, { committedToolCalls: [{ runId: 'r1', toolCallId: 'k1', attempt: 1 }] }, c);
        await store.startToolCalls(scope, [call('r1', 'k1', { attempt: 2 })], c);
        assert.deepEqual(
          (await store.loadToolCalls(scope, 'r1')).map((t) => t.attempt),
          [2],
        );
      });
    });

    it('fences tool-call starts by the run’s attempt: an attempt lower than the saved one records nothing', async () => {
      await withStore(make, async (store) => {
        const c = ctx('c1');
        await store.commit(scope, { runs: [run(c, 'r1')] }, c);
        await store.startToolCalls(scope, [call('r1', 'k1')], c); // attempt 1, current: taken
        // Another writer resumed the run (attempt 2): the first attempt's next call must not start.
        await store.commit(scope, { runs: [run(c, 'r1', { attempt: 2 })] }, c);
        await rejectsWith(
          store.startToolCalls(scope, [call('r1', 'k2'), call('r1', 'k3', { attempt: 2 })], c),
          'ERR_STORE_FENCED',
          /saved at attempt 2; .*attempt 1 is stale/,
        );
        assert.deepEqual(
          (await store.loadToolCalls(scope, 'r1')).map((t) => [t.toolCallId, t.attempt]),
          [['k1', 1]],
        );
        // The current attempt's starts are taken.
        await store.startToolCalls(scope, [call('r1', 'k3', { attempt: 2 })], c);
        assert.deepEqual(
          (await store.loadToolCalls(scope, 'r1')).map((t) => [t.toolCallId, t.attempt]),
          [
            ['k1', 1],
            ['k3', 2],
          ],
        );
      });
    });

    it('refuses to start again a call that committed (its side effect must not run twice)', async () => {
      await withStore(make, async (store) => {
        const c = ctx('c1');
        await store.startToolCalls(scope, [call('r1', 'k1')], c);
        await store.commit(scope, { committedToolCalls: [{ runId: 'r1', toolCallId: 'k1', attempt: 1 }] }, c);
        await rejectsWith(
          store.startToolCalls(scope, [call('r1', 'k1')], c),
          'ERR_INVALID_ARGUMENT',
          /already committed/,
        );
      });
    });

    it('refuses a malformed call', async () => {
      await withStore(make, async (store) => {
        await rejectsWith(
          store.startToolCalls(scope, [call('r1', 'k1', { idempotent: 'yes' as never })], ctx('c1')),
          'ERR_INVALID_ARGUMENT',
          /idempotent/,
        );
      });
    });
  });

  describe(`${name}: deletion and retention`, () => {
    it('deleteConversation removes its states, messages, runs, tool calls and requests', async () => {
      await withStore(make, async (store) => {
        const c = ctx('c1');
        const keep = ctx('c2');
        for (const x of [c, keep]) {
          await store.startToolCalls(scope, [call(`r-${x.conversationId}`, 'k1')], x);
          await store.commit(
            scope,
            {
              envelope: envelope(x, { status: 'suspended' }),
              messages: [{ role: 'user', content: 'hi' }],
              runs: [run(x, `r-${x.conversationId}`, { status: 'suspended' })],
              openedRequests: [request(x, `q-${x.conversationId}`)],
            },
            x,
          );
        }
        assert.equal(await store.deleteConversation(scope, c), true);
        assert.equal(await store.loadState(scope, c), undefined);
        assert.deepEqual(await store.loadMessages(scope, c), []);
        assert.deepEqual(await store.loadRuns(scope, c), []);
        assert.deepEqual(await store.loadToolCalls(scope, 'r-c1'), []);
        assert.equal(await store.getRequest(scope, 'q-c1'), undefined);
        assert.deepEqual(
          (await store.listConversations(scope)).items.map((s) => s.conversationId),
          ['c2'],
        );
        assert.equal((await store.loadToolCalls(scope, 'r-c2')).length, 1);
        assert.equal(await store.deleteConversation(scope, c), false);
      });
    });

    it('deleteConversation is refused (ERR_CONVERSATION_BUSY) while a run of it is running, and deletes nothing; once its end is saved, it deletes', async () => {
      await withStore(make, async (store) => {
        const c = ctx('c1');
        await store.startToolCalls(scope, [call('r1', 'k1')], c);
        await store.commit(scope, { envelope: envelope(c, { status: 'running' }), runs: [run(c, 'r1')] }, c);
        await rejectsWith(
          store.deleteConversation(scope, c),
          'ERR_CONVERSATION_BUSY',
          /conversation c1 is running a message \(run r1[,)][\s\S]*nothing was deleted; cancel/,
        );
        assert.equal((await store.loadState(scope, c))?.status, 'running');
        assert.deepEqual(
          (await store.loadRuns(scope, c)).map((r) => r.runId),
          ['r1'],
        );
        assert.equal((await store.loadToolCalls(scope, 'r1')).length, 1);
        await store.commit(scope, { runs: [run(c, 'r1', { status: 'cancelled' })] }, c);
        assert.equal(await store.deleteConversation(scope, c), true);
        assert.equal(await store.getRun(scope, 'r1'), undefined);
      });
    });

    it('a later attempt of a run whose conversation was deleted is refused (ERR_STORE_FENCED) and writes nothing back; a first attempt starts a conversation', async () => {
      await withStore(make, async (store) => {
        const c = ctx('c1');
        await store.commit(scope, { envelope: envelope(c), runs: [run(c, 'r1', { status: 'suspended' })] }, c);
        assert.equal(await store.deleteConversation(scope, c), true);
        // The run resumed (attempt 2) after the deletion: its checkpoint, its tool calls, its end.
        await rejectsWith(
          store.commit(scope, { runs: [run(c, 'r1', { attempt: 2 })] }, c),
          'ERR_STORE_FENCED',
          /was deleted/,
        );
        await rejectsWith(
          store.startToolCalls(scope, [call('r1', 'k1', { attempt: 2 })], c),
          'ERR_STORE_FENCED',
          /was deleted/,
        );
        await rejectsWith(
          store.commit(scope, { runs: [run(c, 'r1', { attempt: 2, status: 'done' })] }, c),
          'ERR_STORE_FENCED',
          /was deleted/,
        );
        assert.deepEqual(await store.loadRuns(scope, c, { interrupted: true }), []);
        assert.deepEqual(await store.loadToolCalls(scope, 'r1'), []);
        assert.equal(await store.loadState(scope, c), undefined);
        // A new message of the same id starts afresh.
        await store.commit(scope, { runs: [run(c, 'r2')] }, c);
        assert.deepEqual(
          (await store.loadRuns(scope, c)).map((r) => r.runId),
          ['r2'],
        );
      });
    });

    it('a save based on a state since deleted is refused (ERR_STORE_FENCED) and writes nothing back', async () => {
      await withStore(make, async (store) => {
        const c = ctx('c1');
        await store.commit(scope, { envelope: envelope(c), basedOn: 0 }, c);
        const revision = (await store.loadState(scope, c))?.revision as number;
        assert.equal(await store.deleteConversation(scope, c), true);
        await rejectsWith(
          store.commit(
            scope,
            {
              envelope: envelope(c, { savedAt: 2_000 }),
              messages: [{ role: 'assistant', content: 'late' }],
              basedOn: revision,
            },
            c,
          ),
          'ERR_STORE_FENCED',
          /no longer saved/,
        );
        assert.equal(await store.loadState(scope, c), undefined);
        assert.deepEqual(await store.loadMessages(scope, c), []);
        assert.deepEqual((await store.listConversations(scope)).items, []);
        // A conversation started anew under the same id (nothing saved: based on 0) is saved.
        await store.commit(scope, { envelope: envelope(c, { savedAt: 3_000 }), basedOn: 0 }, c);
        assert.equal((await store.loadState(scope, c))?.savedAt, 3_000);
      });
    });

    it('a run whose end failed to save: markInterrupted marks it (its writer stopped), and it holds no deletion up', async () => {
      await withStore(make, async (store) => {
        const c = ctx('c1');
        await store.commit(scope, { runs: [run(c, 'r1'), run(c, 'r2')] }, c);
        // The end of r1 is refused as a whole (it commits a call that was never started).
        await rejectsWith(
          store.commit(
            scope,
            {
              runs: [run(c, 'r1', { status: 'done' })],
              committedToolCalls: [{ runId: 'r1', toolCallId: 'k9', attempt: 1 }],
            },
            c,
          ),
          'ERR_INVALID_ARGUMENT',
          /never started/,
        );
        assert.equal((await store.getRun(scope, 'r1'))?.status, 'running', 'nothing of the failed end was saved');
        const marked = await store.markInterrupted({ now: 5_000 });
        assert.deepEqual(
          marked.map((r) => [r.runId, r.status, r.updatedAt]),
          [['r1', 'interrupted', 5_000]],
        );
        assert.equal((await store.getRun(scope, 'r1'))?.status, 'interrupted');
        assert.equal(
          (await store.getRun(scope, 'r2'))?.status,
          'running',
          'a run still run by its writer is left alone',
        );
        assert.deepEqual(await store.markInterrupted(), [], 'marked once');
        await rejectsWith(store.deleteConversation(scope, c), 'ERR_CONVERSATION_BUSY', /run r2/);
        // A later end of r2 that fails lets the deletion go through before any markInterrupted.
        await rejectsWith(
          store.commit(
            scope,
            {
              runs: [run(c, 'r2', { status: 'failed' })],
              committedToolCalls: [{ runId: 'r2', toolCallId: 'k9', attempt: 1 }],
            },
            c,
          ),
          'ERR_INVALID_ARGUMENT',
        );
        assert.equal(await store.deleteConversation(scope, c), true);
      });
    });

    it('a failed end that a later write of the run supersedes is not marked', async () => {
      await withStore(make, async (store) => {
        const c = ctx('c1');
        await store.commit(scope, { runs: [run(c, 'r1')] }, c);
        await rejectsWith(
          store.commit(
            scope,
            {
              runs: [run(c, 'r1', { status: 'done' })],
              committedToolCalls: [{ runId: 'r1', toolCallId: 'k9', attempt: 1 }],
            },
            c,
          ),
          'ERR_INVALID_ARGUMENT',
        );
        // Resumed (a new attempt) and running again: its writer runs it.
        await store.commit(scope, { runs: [run(c, 'r1', { attempt: 2 })] }, c);
        assert.deepEqual(await store.markInterrupted(), []);
        assert.equal((await store.getRun(scope, 'r1'))?.status, 'running');
      });
    });

    it('prune removes finished runs, committed tool calls and closed requests older than the policy', async () => {
      await withStore(make, async (store) => {
        const c = ctx('c1');
        await store.startToolCalls(scope, [call('old-done', 'k1'), call('live', 'k2')], c);
        await store.commit(
          scope,
          {
            runs: [
              run(c, 'old-done', { status: 'done', updatedAt: 100 }),
              run(c, 'new-done', { status: 'failed', updatedAt: 9_500 }),
              run(c, 'live', { status: 'suspended', updatedAt: 100 }),
            ],
            openedRequests: [request(c, 'closed'), request(c, 'open')],
          },
          c,
        );
        await store.commit(
          scope,
          { committedToolCalls: [{ runId: 'live', toolCallId: 'k2', attempt: 1 }], at: 200 },
          c,
        );
        await store.answerRequest(scope, 'closed', { id: 'local-closed', ok: true }, 300);
        const result = await store.prune({ finishedRunsOlderThanMs: 1_000, now: 10_000 });
        assert.deepEqual(result, { runs: 1, toolCalls: 2, requests: 1 });
        assert.deepEqual(
          (await store.loadRuns(scope, c)).map((r) => r.runId),
          ['live'],
        );
        assert.equal(await store.getRequest(scope, 'closed'), undefined);
        assert.equal((await store.getRequest(scope, 'open'))?.status, 'open');
        const again = await store.prune({ finishedRunsOlderThanMs: 0, now: 10_000 });
        assert.deepEqual(again, { runs: 1, toolCalls: 0, requests: 0 });
      });
    });

    it('release keeps a conversation that waits on a person', async () => {
      await withStore(make, async (store) => {
        const c = ctx('c1');
        await store.commit(scope, { envelope: envelope(c), openedRequests: [request(c, 'q1')] }, c);
        assert.equal(await store.release(scope, c), false);
        assert.equal((await store.loadState(scope, c))?.agentId, c.agentId);
        assert.equal((await store.getRequest(scope, 'q1'))?.status, 'open');
      });
    });

    it('release of an idle conversation either drops all of it (true) or keeps all of it (false)', async () => {
      await withStore(make, async (store) => {
        const c = ctx('c1');
        await store.commit(scope, { envelope: envelope(c), messages: [{ role: 'user', content: 'x' }] }, c);
        const dropped = await store.release(scope, c);
        assert.equal((await store.loadState(scope, c)) === undefined, dropped);
        assert.equal((await store.loadMessages(scope, c)).length === 0, dropped);
      });
    });
  });
}
