// A second process on the same SQLite file, driven by its parent over IPC
// (`fork`): `race <file> <n>` answers requests q0..q(n-1) as fast as it can
// once told `go` (`race-reverse` from the end); `own <file>` saves a running run and then waits to be killed.
import { sqlitePersistence } from '@troupe/sqlite';
import { ctx, run, scopeOf, tenantKey } from './records.js';

const [mode, file, count] = process.argv.slice(2);
if (file === undefined || process.send === undefined)
  throw new Error('run me with fork(storeChild.js, [mode, file, n])');
const send = (message: unknown) => process.send?.(message);
const store = sqlitePersistence({ file, tenantKey });
const scope = scopeOf('t1');

if (mode === 'race' || mode === 'race-reverse') {
  process.once('message', async () => {
    const taken: string[] = [];
    const n = Number(count);
    for (let k = 0; k < n; k++) {
      // The reverse racer meets the forward one in the middle, where both try the same requests.
      const i = mode === 'race' ? k : n - 1 - k;
      const result = await store.answerRequest(scope, `q${i}`, { id: 'x', ok: true, data: process.pid }, i);
      if (result.status === 'taken') taken.push(`q${i}`);
    }
    await store.close();
    send({ taken });
    process.disconnect();
  });
  send('ready');
} else if (mode === 'own') {
  const c = ctx('child-conversation');
  await store.commit(scope, { runs: [run(c, 'r-child')] }, c);
  send('ready');
} else {
  throw new Error(`unknown mode ${String(mode)}`);
}
