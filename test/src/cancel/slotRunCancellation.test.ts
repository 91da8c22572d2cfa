import assert from 'node:assert/strict';
import { once } from 'node:events';
import { describe, it } from 'node:test';
import { MessageChannel } from 'node:worker_threads';
import { CancelledError, isTroupeError } from '@troupe/core';
import { slotRunCancellation } from '@troupe/core/internal';
import { ManualClock } from '@troupe/core/testing';
import { CancellationTable } from '@troupe/supervisor/internal';
import { afterWakeups } from '../fixtures/afterWakeups.js';

// Same-thread tests of the tokens; the cross-thread ones are in workers.test.ts.
// A waitAsync promise resolves on a later task even on one thread, so the
// signal bridge is exercised for real here too; `afterWakeups()` waits until
// the wakeups a cancel or a notify posted have been delivered.

function setup(lanes = 4) {
  const table = new CancellationTable({ capacity: 4, lanes });
  const handle = table.register('run');
  const run = slotRunCancellation(table.buffer, handle);
  return { table, handle, run };
}

describe('slotRunCancellation: the run token, four ways', () => {
  it('already cancelled: isCancelled, reason, throwIfCancelled and an aborted signal', () => {
    const { table, run } = setup();
    table.cancel('run', 'user');
    assert.equal(run.token.isCancelled(), true);
    assert.equal(run.token.reason, 'user');
    assert.throws(
      () => run.token.throwIfCancelled(),
      (error: unknown) => error instanceof CancelledError && error.reason === 'user',
    );
    assert.equal(run.token.signal.aborted, true);
    assert.ok(isTroupeError(run.token.signal.reason, 'ERR_CANCELLED'));
    run.close();
  });

  it('cancelled while running: the signal bridge aborts with a CancelledError carrying the reason', async () => {
    const { table, run } = setup();
    const signal = run.token.signal;
    assert.equal(signal.aborted, false);
    run.token.throwIfCancelled();
    const aborted = once(signal, 'abort');
    table.cancel('run', 'shutdown');
    assert.equal(run.token.isCancelled(), true, 'the flag is visible at once');
    await aborted;
    assert.ok(signal.reason instanceof CancelledError);
    assert.equal((signal.reason as CancelledError).reason, 'shutdown');
    run.close();
  });

  it('cancelled after completion: no effect on the closed token or its signal', async () => {
    const { table, run } = setup();
    const signal = run.token.signal;
    run.close();
    table.cancel('run', 'user');
    await afterWakeups();
    assert.equal(run.token.isCancelled(), false);
    assert.equal(run.token.reason, undefined);
    assert.equal(signal.aborted, false);
    table.release('run');
    assert.equal(run.token.isCancelled(), false, 'frozen even after the slot is released');
  });

  it('no sharing between instances: cancelling one run leaves another (and its calls) alone', async () => {
    const table = new CancellationTable({ capacity: 4 });
    const a = slotRunCancellation(table.buffer, table.register('a'));
    const b = slotRunCancellation(table.buffer, table.register('b'));
    const bCall = b.openCall(undefined);
    const bSignal = b.token.signal;
    table.cancel('a', 'user');
    await afterWakeups();
    assert.equal(a.token.isCancelled(), true);
    assert.equal(b.token.isCancelled(), false);
    assert.equal(bCall.token.isCancelled(), false);
    assert.equal(bSignal.aborted, false);
    bCall.close();
    a.close();
    b.close();
  });
});

describe('slotRunCancellation: call tokens (lanes), four ways', () => {
  it('already cancelled: a call opened under a cancelled run starts cancelled with the run’s reason', () => {
    const { table, run } = setup();
    table.cancel('run', 'deadline');
    const call = run.openCall(undefined);
    assert.equal(call.token.reason, 'deadline');
    assert.equal(call.token.signal.aborted, true);
    call.close();
    run.close();
  });

  it('cancelled while running: the run’s cancel reaches open calls (push-down) and their signals', async () => {
    const { table, run } = setup();
    const call = run.openCall(undefined);
    const aborted = once(call.token.signal, 'abort');
    table.cancel('run', 'user');
    assert.equal(call.token.reason, 'user');
    await aborted;
    call.close();
    run.close();
  });

  it('a call cancelled alone (its timeout) leaves the run and the other calls live; its signal aborts', async () => {
    const { run } = setup();
    const a = run.openCall(undefined);
    const b = run.openCall(undefined);
    const aborted = once(a.token.signal, 'abort');
    a.cancel('deadline');
    a.cancel('user');
    assert.equal(a.token.reason, 'deadline', 'the first reason stays');
    assert.equal(b.token.isCancelled(), false);
    assert.equal(run.token.isCancelled(), false);
    await aborted;
    assert.equal((a.token.signal.reason as CancelledError).reason, 'deadline');
    a.close();
    b.close();
    run.close();
  });

  it('cancelled after completion: a closed call keeps its final state and a later cancel is a no-op', () => {
    const { table, run } = setup(1);
    const timedOut = run.openCall(undefined);
    timedOut.cancel('deadline');
    timedOut.close();
    assert.equal(timedOut.token.reason, 'deadline', 'the executor reads the reason after close()');
    const finished = run.openCall(undefined); // the same lane, reused
    finished.close();
    const next = run.openCall(undefined); // and again
    finished.cancel('user');
    timedOut.cancel('user');
    assert.equal(next.token.isCancelled(), false, 'a late cancel of a closed call never hits the next call');
    table.cancel('run', 'user');
    assert.equal(finished.token.isCancelled(), false);
    assert.equal(timedOut.token.reason, 'deadline');
    assert.equal(next.token.reason, 'user');
    next.close();
    run.close();
  });

  it('a call opened with a deadline already past starts cancelled (deadline) when a clock is given', () => {
    const clock = new ManualClock(10_000);
    const table = new CancellationTable({ capacity: 2, clock });
    const run = slotRunCancellation(table.buffer, table.register('r'), { clock });
    const call = run.openCall(9_000);
    assert.equal(call.token.reason, 'deadline');
    assert.equal(run.token.isCancelled(), false);
    call.close();
    run.close();
  });
});

describe('slotRunCancellation: every lane busy', () => {
  it('falls back to the run word plus a local flag: sees the run’s cancel and its own, not a neighbour’s', async () => {
    const { table, run } = setup(1);
    const laned = run.openCall(2_000);
    const fallback = run.openCall(2_000);
    const other = run.openCall(undefined);
    // The watchdog cannot cancel a fallback call alone: only the laned call expires.
    const expired = table.expireLanes(2_000);
    assert.equal(expired.length, 1);
    assert.equal(laned.token.reason, 'deadline');
    assert.equal(fallback.token.isCancelled(), false);
    const aborted = once(fallback.token.signal, 'abort');
    fallback.cancel('deadline');
    await aborted;
    assert.equal(fallback.token.reason, 'deadline');
    assert.equal(other.token.isCancelled(), false);
    assert.equal(run.token.isCancelled(), false);
    const otherAborted = once(other.token.signal, 'abort');
    table.cancel('run', 'user');
    assert.equal(other.token.reason, 'user');
    await otherAborted;
    assert.equal(fallback.token.reason, 'deadline', 'its own earlier reason stays');
    run.close();
  });
});

describe('slotRunCancellation: close()', () => {
  it('closes calls still open, frees their lanes, and refuses new calls', () => {
    const { table, run } = setup(2);
    const a = run.openCall(5_000);
    run.openCall(undefined);
    run.close();
    run.close();
    assert.equal(a.token.isCancelled(), false);
    assert.deepEqual(table.expireLanes(10_000), [], 'no lane deadline left behind');
    assert.throws(
      () => run.openCall(undefined),
      (error: unknown) => isTroupeError(error, 'ERR_CLOSED'),
    );
  });

  it('bridges through one doorbell waiter per thread: a ring for another slot aborts nothing, nothing dangles', async () => {
    const table = new CancellationTable({ capacity: 4, lanes: 2 });
    const bell = table.slots.doorbell;
    const a = slotRunCancellation(table.buffer, table.register('a'));
    const b = slotRunCancellation(table.buffer, table.register('b'));
    const signals = { a: a.token.signal, b: b.token.signal };
    await afterWakeups();
    assert.equal(Atomics.notify(bell, 0), 1, 'two bridged tokens, one waiter');
    await afterWakeups();
    assert.deepEqual([signals.a.aborted, signals.b.aborted], [false, false], 'a spurious wakeup aborts nothing');
    table.cancel('b', 'user');
    await afterWakeups();
    assert.deepEqual([signals.a.aborted, signals.b.aborted], [false, true], 'the ring reaches only the cancelled run');
    a.close();
    b.close();
    assert.equal(Atomics.notify(bell, 0), 1, 'the waiter stays until the next ring');
    await afterWakeups();
    assert.equal(Atomics.notify(bell, 0), 0, 'then, with no token bridged, it lets go');
    assert.equal(signals.a.aborted, false);
  });

  it('cancels of several slots in one batch ring the doorbell once; ending a run does not ring it', async () => {
    const table = new CancellationTable({ capacity: 8, lanes: 2 });
    const bell = table.slots.doorbell;
    const keys = ['root', 'a', 'b', 'a1'];
    const runs = keys.map((key) => slotRunCancellation(table.buffer, table.register(key)));
    const signals = runs.map((run) => run.token.signal);
    const rung = Atomics.load(bell, 0);
    table.slots.beginBatch();
    table.cancel('root', 'user');
    for (const key of keys.slice(1)) table.cancel(key, 'parent');
    table.slots.endBatch();
    assert.equal(Atomics.load(bell, 0) - rung, 1, 'one ring for four cancelled runs');
    await afterWakeups();
    assert.deepEqual(
      signals.map((signal) => (signal.reason as CancelledError | undefined)?.reason),
      ['user', 'parent', 'parent', 'parent'],
    );
    for (const run of runs) run.close();
    for (const key of keys) table.release(key);
    assert.equal(Atomics.load(bell, 0) - rung, 1, 'releasing closed runs rings nothing');
  });

  it('a run released without closing its token still aborts it (shutdown) when its watcher re-reads', async () => {
    const table = new CancellationTable({ capacity: 4, lanes: 2 });
    const run = slotRunCancellation(table.buffer, table.register('run'));
    const aborted = once(run.token.signal, 'abort');
    table.release('run'); // nothing rings for a release: the watcher's periodic re-read finds it
    // The watcher's wait does not keep the event loop alive (nor should it): an open port does, meanwhile.
    const keepAlive = new MessageChannel();
    keepAlive.port1.on('message', () => {});
    try {
      await aborted;
    } finally {
      keepAlive.port1.close();
    }
    assert.equal((run.token.signal.reason as CancelledError).reason, 'shutdown');
    await afterWakeups();
    assert.equal(Atomics.notify(table.slots.doorbell, 0), 0, 'and with nothing left to watch, it let go');
  });

  it('a hundred bridged runs made from the raw buffer leave one waiter, not one each', async () => {
    const table = new CancellationTable({ capacity: 4, lanes: 2 });
    for (let i = 0; i < 100; i++) {
      const run = slotRunCancellation(table.buffer, table.register(`run-${i}`));
      void run.token.whenCancelled();
      run.close();
      table.release(`run-${i}`);
    }
    await afterWakeups();
    assert.equal(Atomics.notify(table.slots.doorbell, 0), 1);
  });
});

describe('slotRunCancellation: the run deadline', () => {
  it('reads the deadline stored in the slot by default; takes the one given; null means none', () => {
    const table = new CancellationTable({ capacity: 4, lanes: 2 });
    const handle = table.register('run', { deadline: 5_000 });
    const read = slotRunCancellation(table.buffer, handle);
    assert.equal(read.deadline, 5_000);
    const given = slotRunCancellation(table.buffer, handle, { deadline: 4_000 });
    assert.equal(given.deadline, 4_000);
    const none = slotRunCancellation(table.buffer, table.register('other'), { deadline: null });
    assert.equal(none.deadline, undefined);
    for (const r of [read, given, none]) r.close();
  });

  it('refuses a deadline that is not a finite time', () => {
    const table = new CancellationTable({ capacity: 4, lanes: 2 });
    const handle = table.register('run');
    assert.throws(
      () => slotRunCancellation(table.buffer, handle, { deadline: Number.NaN }),
      (e: unknown) => isTroupeError(e, 'ERR_INVALID_ARGUMENT'),
    );
  });
});

/** What `promise` settled with, or 'pending', once every wakeup posted so far has been delivered. */
async function stateOf(promise: Promise<unknown>): Promise<unknown> {
  let state: unknown = 'pending';
  promise.then((value) => {
    state = value;
  });
  await afterWakeups();
  return state;
}

describe('slotRunCancellation: whenCancelled(), the cheap race', () => {
  it('run token: resolves with the reason when cancelled later, at once when already cancelled; one promise', async () => {
    const { table, run } = setup();
    const cancelled = run.token.whenCancelled();
    assert.equal(run.token.whenCancelled(), cancelled, 'one promise per token');
    assert.equal(await stateOf(cancelled), 'pending');
    table.cancel('run', 'deadline');
    assert.equal(await cancelled, 'deadline');
    run.close();
    const late = setup();
    late.table.cancel('run', 'user');
    assert.equal(await late.run.token.whenCancelled(), 'user');
    late.run.close();
  });

  it('never settles for a run that ended uncancelled, even if its slot is cancelled afterwards', async () => {
    const { table, run } = setup();
    const cancelled = run.token.whenCancelled();
    run.close();
    table.cancel('run', 'user');
    assert.equal(await stateOf(cancelled), 'pending');
    assert.equal(await stateOf(run.token.whenCancelled()), 'pending');
  });

  it('shares one bridge with signal: both settle with the same reason', async () => {
    const { table, run } = setup();
    const signal = run.token.signal;
    const cancelled = run.token.whenCancelled();
    table.cancel('run', 'shutdown');
    assert.equal(await cancelled, 'shutdown');
    assert.equal(signal.aborted, true);
    assert.equal((signal.reason as CancelledError).reason, 'shutdown');
    run.close();
  });

  it('lane and fallback calls: their own cancel and the run’s both settle it; a closed call stays as it was', async () => {
    const { table, run } = setup(1);
    const laned = run.openCall(5_000);
    const fallback = run.openCall(5_000);
    const laneCancelled = laned.token.whenCancelled();
    const ownCancelled = fallback.token.whenCancelled();
    fallback.cancel('deadline');
    assert.equal(await ownCancelled, 'deadline');
    const other = run.openCall(undefined);
    const otherCancelled = other.token.whenCancelled();
    const closed = run.openCall(undefined);
    const closedCancelled = closed.token.whenCancelled();
    closed.close();
    table.cancel('run', 'user');
    assert.equal(await laneCancelled, 'user');
    assert.equal(await otherCancelled, 'user');
    assert.equal(await stateOf(closedCancelled), 'pending', 'closed before the cancel');
    run.close();
  });
});
