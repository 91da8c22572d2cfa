import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { CancellationTable } from '@troupe/supervisor/internal';
import { type CancelWorker, startCancelWorker } from './startCancelWorker.js';

// Real worker threads on the table's real SharedArrayBuffer. Every test
// synchronises on the workers' messages (or an Atomics flag), never on sleeps,
// and terminates its workers so the process exits.

function workerFor(t: TestContext, table: CancellationTable): CancelWorker {
  const worker = startCancelWorker(table.buffer);
  t.after(() => worker.terminate());
  return worker;
}

describe('cancellation across threads', () => {
  it('a worker spinning on isCancelled() stops after a cancel from the main thread', async (t) => {
    const table = new CancellationTable({ capacity: 4 });
    const worker = workerFor(t, table);
    const progress = new Int32Array(new SharedArrayBuffer(4));
    worker.send({ op: 'spin-run', handle: table.register('spinner'), progress });
    await worker.next('spinning');
    // Cancel only once the loop is really running (posting 'spinning' can stall the worker).
    while (Atomics.load(progress, 0) < 1_000) {}
    assert.equal(table.cancel('spinner', 'user'), true);
    const stopped = await worker.next('stopped');
    assert.equal(stopped.reason, 'user');
    assert.ok((stopped.iterations as number) >= 1_000, 'it was spinning when cancelled');
  });

  it('a worker whose run is already cancelled stops at its first check', async (t) => {
    const table = new CancellationTable({ capacity: 4 });
    const worker = workerFor(t, table);
    const handle = table.register('late');
    table.cancel('late', 'shutdown');
    worker.send({ op: 'spin-run', handle });
    const stopped = await worker.next('stopped');
    assert.equal(stopped.reason, 'shutdown');
    assert.equal(stopped.iterations, 0);
  });

  it('a worker awaiting a promise that honours `signal` is woken (its event loop idle)', async (t) => {
    const table = new CancellationTable({ capacity: 4 });
    const worker = workerFor(t, table);
    worker.send({ op: 'await-signal', handle: table.register('waiter') });
    await worker.next('waiting');
    table.cancel('waiter', 'deadline');
    const aborted = await worker.next('aborted');
    assert.deepEqual(
      { name: aborted.name, code: aborted.code, reason: aborted.reason },
      { name: 'CancelledError', code: 'ERR_CANCELLED', reason: 'deadline' },
    );
  });

  it('the cancels of a subtree (one per slot, as the run tree walks it) reach runs in other workers, not their cousins', async (t) => {
    const table = new CancellationTable({ capacity: 8 });
    const left = workerFor(t, table);
    const right = workerFor(t, table);
    const bystander = workerFor(t, table);
    for (const key of ['root', 'child', 'gc-left', 'gc-right', 'uncle', 'cousin']) table.register(key);
    left.send({ op: 'spin-run', handle: table.register('ggc') });
    right.send({ op: 'await-signal', handle: table.handle('gc-right') ?? assert.fail('registered') });
    bystander.send({ op: 'hold', name: 'cousin', handle: table.handle('cousin') ?? assert.fail('registered') });
    await Promise.all([left.next('spinning'), right.next('waiting'), bystander.next('held')]);
    table.cancel('child', 'user');
    for (const key of ['gc-left', 'gc-right', 'ggc']) table.cancel(key, 'parent');
    assert.equal((await left.next('stopped')).reason, 'parent');
    assert.equal((await right.next('aborted')).reason, 'parent');
    bystander.send({ op: 'check', name: 'cousin' });
    const cousin = await bystander.next('checked');
    assert.equal(cousin.cancelled, false);
    assert.equal(cousin.aborted, false);
    assert.equal(table.isCancelled('root'), false);
    assert.equal(table.isCancelled('uncle'), false);
  });

  it("a run registered cancelled (a child born during its parent's cancel) starts cancelled, in another worker", async (t) => {
    const table = new CancellationTable({ capacity: 4 });
    const parentWorker = workerFor(t, table);
    const childWorker = workerFor(t, table);
    parentWorker.send({ op: 'spin-then-spawn', handle: table.register('parent') });
    await parentWorker.next('spinning');
    table.cancel('parent', 'parent');
    // The parent noticed the cancel and asks for a child anyway (the race a spawn can lose): the
    // tree registers it cancelled, as its parent is.
    const want = await parentWorker.next('want-child');
    assert.equal(want.reason, 'parent');
    table.register('child', { slot: 'deferred' });
    table.cancel('child', 'parent');
    childWorker.send({ op: 'child', handle: table.bind('child', table.local) });
    const child = await childWorker.next('child');
    assert.equal(child.cancelled, true);
    assert.equal(child.reason, 'parent');
  });

  it('generations prevent a stale cancel after slot reuse', async (t) => {
    const table = new CancellationTable({ capacity: 1, maxCapacity: 1 });
    const worker = workerFor(t, table);
    const old = table.register('old');
    worker.send({ op: 'hold', name: 'old', handle: old });
    await worker.next('held');
    table.cancel('old', 'user');
    assert.equal((await worker.next('held-aborted')).name, 'old');
    table.release('old');
    const reused = table.register('new');
    assert.equal(reused.index, old.index, 'the same slot');
    worker.send({ op: 'hold', name: 'new', handle: reused });
    assert.equal((await worker.next('held')).cancelled, false, 'the new run does not inherit the old cancel');
    // Cancels aimed at the old run do not reach the new one.
    assert.equal(table.cancel('old', 'user'), false);
    assert.equal(table.slots.cancelRun(old, 'user'), false);
    worker.send({ op: 'check', name: 'new' });
    const fresh = await worker.next('checked');
    assert.deepEqual([fresh.cancelled, fresh.aborted], [false, false]);
    worker.send({ op: 'check', name: 'old' });
    assert.equal((await worker.next('checked')).reason, 'shutdown', 'the old token sees its slot gone');
    table.cancel('new', 'shutdown');
    assert.equal((await worker.next('held-aborted')).name, 'new');
    worker.send({ op: 'close', name: 'old' });
    worker.send({ op: 'close', name: 'new' });
    await worker.next('closed');
    await worker.next('closed');
  });

  it('a lane deadline cancels only that call; the run goes on', async (t) => {
    const table = new CancellationTable({ capacity: 4 });
    const worker = workerFor(t, table);
    const deadline = Date.now() + 3_600_000;
    worker.send({ op: 'spin-call', handle: table.register('run'), deadline });
    await worker.next('spinning');
    // The watchdog's lane pass, run at the call's deadline (no waiting).
    const expired = table.expireLanes(deadline);
    assert.equal(expired.length, 1);
    assert.equal(expired[0]?.kind, 'lane');
    const stopped = await worker.next('stopped');
    assert.equal(stopped.callReason, 'deadline');
    assert.equal(stopped.signalReason, 'deadline');
    assert.equal(stopped.runCancelled, false);
    assert.equal(stopped.nextLive, true, 'a later call of the same run is live');
    assert.equal(table.isCancelled('run'), false);
  });

  it('a worker attached before the table grew sees runs in the new slots', async (t) => {
    const table = new CancellationTable({ capacity: 1, maxCapacity: 16 });
    const worker = workerFor(t, table);
    table.register('first');
    worker.send({ op: 'hold', name: 'first', handle: table.handle('first') ?? assert.fail('registered') });
    await worker.next('held');
    let last = table.register('r1');
    for (let i = 2; i < 10; i++) last = table.register(`r${i}`);
    assert.equal(table.capacity, 16);
    worker.send({ op: 'spin-run', handle: last });
    await worker.next('spinning');
    table.cancel('r9', 'user');
    assert.equal((await worker.next('stopped')).reason, 'user');
    worker.send({ op: 'check', name: 'first' });
    assert.equal((await worker.next('checked')).cancelled, false, 'old slots are intact after growth');
  });

  it('push-down never leaves a call opened during the cancel live (open vs cancel race, 200 trials)', async (t) => {
    const table = new CancellationTable({ capacity: 4, lanes: 2 });
    const worker = workerFor(t, table);
    const control = new Int32Array(new SharedArrayBuffer(8));
    let opened = 0;
    for (let trial = 0; trial < 200; trial++) {
      Atomics.store(control, 0, 0);
      Atomics.store(control, 1, 0);
      worker.send({ op: 'race', handle: table.register(`trial-${trial}`), control });
      await worker.next('racing');
      // Land the cancel mid-loop, at a different call each trial (the worker
      // publishes how many calls it opened; it keeps opening until told).
      const target = 2 + ((trial * 7919) % 50);
      while (Atomics.load(control, 1) < target) {}
      table.cancel(`trial-${trial}`, 'user');
      Atomics.store(control, 0, 1);
      const raced = await worker.next('raced');
      assert.equal(raced.ok, true, `trial ${trial}: ${JSON.stringify(raced)}`);
      opened += raced.opened as number;
      table.release(`trial-${trial}`);
    }
    assert.ok(opened > 200 * 3, 'calls were opened while cancels landed');
  });
});
