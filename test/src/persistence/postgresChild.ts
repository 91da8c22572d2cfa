// Another process (another API host's store) on the same PostgreSQL database, driven by its parent
// over IPC (`fork`). argv: mode, url, schema, then the mode's own.
// - `answer <n> <forward|reverse>`: on `go`, answers q0..q(n-1) as fast as it can; reports the taken ones.
// - `turns <rounds> <name>`: on `go`, `rounds` times: load the shared conversation's state, append a
//   message of its own to it, save it based on the revision it loaded (with the message for the
//   transcript); reports which saves were taken and how many were fenced.
// - `hold <attempt>`: saves run r1 running at `attempt`, says `ready`; on `calls`, starts a tool call at that
//   attempt and reports the error code (or `ok`).
import { isTroupeError, type Message } from '@troupe/core';
import { postgresPersistence } from '@troupe/postgres';
import { call, ctx, run, scopeOf, tenantKey } from './records.js';

const [mode, url, schema, a, b] = process.argv.slice(2);
if (url === undefined || schema === undefined || process.send === undefined)
  throw new Error('run me with fork(postgresChild.js, [mode, url, schema, ...])');
const send = (message: unknown) => process.send?.(message);
const store = await postgresPersistence({ connectionString: url, schema, tenantKey });
const scope = scopeOf('t1');
const shared = ctx('shared');

const codeOf = (error: unknown) => (isTroupeError(error) ? error.code : String(error));

if (mode === 'answer') {
  process.once('message', async () => {
    const n = Number(a);
    const taken: string[] = [];
    for (let k = 0; k < n; k++) {
      const i = b === 'forward' ? k : n - 1 - k;
      const result = await store.answerRequest(scope, `q${i}`, { id: 'x', ok: true, data: process.pid }, i);
      if (result.status === 'taken') taken.push(`q${i}`);
    }
    await store.close();
    send({ taken });
  });
  send('ready');
} else if (mode === 'turns') {
  process.once('message', async () => {
    const taken: string[] = [];
    let fenced = 0;
    for (let round = 0; round < Number(a); round++) {
      const loaded = await store.loadState(scope, shared);
      if (loaded === undefined) throw new Error('the shared conversation is not saved');
      const said: Message = { role: 'user', content: `${b}:${round}` };
      const state = { ...loaded.state, messages: [...loaded.state.messages, said] };
      const { revision, ...saved } = loaded;
      try {
        await store.commit(scope, { envelope: { ...saved, state }, messages: [said], basedOn: revision }, shared);
        taken.push(said.content as string);
      } catch (error) {
        if (codeOf(error) !== 'ERR_STORE_FENCED') throw error;
        fenced++;
      }
    }
    await store.close();
    send({ taken, fenced });
  });
  send('ready');
} else if (mode === 'hold') {
  const attempt = Number(a);
  await store.commit(scope, { runs: [run(shared, 'r1', { attempt })] }, shared);
  process.on('message', async (message) => {
    if (message !== 'calls') return;
    try {
      await store.startToolCalls(scope, [call('r1', `k-${attempt}`, { attempt })], shared);
      send('ok');
    } catch (error) {
      send(codeOf(error));
    }
  });
  send('ready');
} else {
  throw new Error(`unknown mode ${String(mode)}`);
}
