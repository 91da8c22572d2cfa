import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type CancelReason, isTroupeError } from '@troupe/core';
import { CancelSlots, slotRunCancellation } from '@troupe/core/internal';
import { ManualClock } from '@troupe/core/testing';
import { CancellationTable } from '@troupe/supervisor/internal';

const isInvalid =
  (code = 'ERR_INVALID_ARGUMENT') =>
  (error: unknown) =>
    isTroupeError(error, code as 'ERR_INVALID_ARGUMENT');

describe('CancellationTable: cancel state per slot', () => {
  it('cancels the one run it is told (the run tree walks a subtree); others are untouched', () => {
    const table = new CancellationTable({ capacity: 8 });
    const a = slotRunCancellation(table.slots, table.register('a'));
    const b = slotRunCancellation(table.slots, table.register('b'));
    assert.equal(table.cancel('a', 'user'), true);
    assert.equal(table.reason('a'), 'user');
    assert.equal(a.token.reason, 'user');
    assert.equal(table.isCancelled('b'), false);
    assert.equal(b.token.isCancelled(), false);
    a.close();
    b.close();
  });

  it('keeps the first reason and returns false for an already cancelled, unknown or released key', () => {
    const table = new CancellationTable({ capacity: 4 });
    table.register('p');
    table.register('c');
    assert.equal(table.cancel('c', 'deadline'), true);
    assert.equal(table.cancel('c', 'parent'), false);
    assert.equal(table.reason('c'), 'deadline', 'an earlier reason is never overwritten');
    assert.equal(table.cancel('p', 'user'), true);
    assert.equal(table.cancel('p', 'shutdown'), false);
    assert.equal(table.reason('p'), 'user');
    assert.equal(table.cancel('nobody', 'user'), false);
    assert.equal(table.release('c'), true);
    assert.equal(table.cancel('c', 'user'), false);
    assert.equal(table.release('c'), false);
    assert.equal(table.isCancelled('nobody'), false);
    assert.equal(table.reason('nobody'), undefined);
  });

  it('a run cancelled before it has a slot gets it cancelled when it is bound (a dispatch racing a cancel)', () => {
    const table = new CancellationTable({ capacity: 4 });
    table.register('queued', { slot: 'deferred' });
    assert.equal(table.handle('queued'), undefined);
    assert.equal(table.cancel('queued', 'parent'), true);
    const handle = table.bind('queued', table.local);
    const run = slotRunCancellation(table.slots, handle);
    assert.equal(run.token.isCancelled(), true);
    assert.equal(run.token.reason, 'parent');
    run.close();
  });
});

describe('CancellationTable: slots and generations', () => {
  it('reuses a released slot with the next generation; the old handle never sees the new run', () => {
    const table = new CancellationTable({ capacity: 1, maxCapacity: 1 });
    const first = table.register('first');
    const stale = slotRunCancellation(table.buffer, first);
    table.cancel('first', 'user');
    table.release('first');
    const second = table.register('second');
    assert.equal(second.index, first.index);
    assert.equal(second.generation, first.generation + 1);
    const fresh = slotRunCancellation(table.buffer, second);
    assert.equal(fresh.token.isCancelled(), false, 'no stale cancel after reuse');
    assert.equal(table.isCancelled('second'), false);
    // A cancel aimed at the old generation is a no-op.
    assert.equal(table.slots.cancelRun(first, 'user'), false);
    assert.equal(fresh.token.isCancelled(), false);
    // The old token reads its slot as gone.
    assert.equal(stale.token.isCancelled(), true);
    assert.equal(stale.token.reason, 'shutdown');
    stale.close();
    fresh.close();
  });

  it('marks a released run shutdown so lingering readers stop, before the slot is reused', () => {
    const table = new CancellationTable({ capacity: 2 });
    const handle = table.register('r');
    const lingering = slotRunCancellation(table.buffer, handle);
    table.release('r');
    assert.equal(lingering.token.reason, 'shutdown');
    lingering.close();
  });

  it('grows when full (doubling), then refuses past maxCapacity with ERR_TABLE_FULL naming it', () => {
    const table = new CancellationTable({ capacity: 2, maxCapacity: 5 });
    const handles = [];
    for (let i = 0; i < 5; i++) handles.push(table.register(`r${i}`));
    assert.equal(table.size, 5);
    assert.equal(table.capacity, 5);
    assert.deepEqual(
      handles.map((h) => h.index),
      [0, 1, 2, 3, 4],
    );
    assert.throws(
      () => table.register('r5'),
      (error: unknown) => isTroupeError(error, 'ERR_TABLE_FULL') && /5 slots/.test((error as Error).message),
    );
    // Every slot works after growth, old and new.
    table.cancel('r4', 'user');
    table.cancel('r0', 'user');
    assert.equal(table.reason('r4'), 'user');
    assert.equal(table.isCancelled('r2'), false);
    table.release('r1');
    assert.equal(table.register('r5').index, 1);
  });
});

describe('CancellationTable: deadlines', () => {
  it('carries a deadline to the slot as set (the tree enforces it; the table never cancels a run for it)', () => {
    const clock = new ManualClock(1_000);
    const table = new CancellationTable({ clock, capacity: 4 });
    assert.equal(table.register('p', { deadline: 1_050 }).deadline, 1_050);
    assert.equal(table.setDeadline('p', 5_000), true);
    assert.equal(table.deadlineOf('p'), 5_000);
    assert.equal(table.setDeadline('nobody', 1), false);
    const handle = table.handle('p');
    assert.ok(handle);
    // The slot carries the deadline to the worker (µs precision).
    const run = slotRunCancellation(table.buffer, handle);
    assert.equal(run.deadline, 5_000);
    clock.advance(10_000);
    assert.deepEqual(table.expireLanes(), [], "a run past its deadline is the tree's to cancel");
    assert.equal(table.isCancelled('p'), false);
    assert.equal(table.setDeadline('p', undefined), true);
    assert.equal(table.deadlineOf('p'), undefined);
    run.close();
  });

  it('expireLanes cancels one call whose lane deadline passed; the run and its other calls go on', () => {
    const table = new CancellationTable({ capacity: 2 });
    const handle = table.register('r');
    const run = slotRunCancellation(table.buffer, handle);
    const late = run.openCall(2_000);
    const due = run.openCall(1_000);
    const none = run.openCall(undefined);
    const expired = table.expireLanes(1_000);
    assert.equal(expired.length, 1);
    const entry = expired[0];
    assert.ok(entry?.kind === 'lane');
    assert.equal(entry.key, 'r');
    assert.equal(due.token.reason, 'deadline');
    assert.equal(late.token.isCancelled(), false);
    assert.equal(none.token.isCancelled(), false);
    assert.equal(run.token.isCancelled(), false);
    assert.equal(table.isLaneHeld('r', entry.lane, entry.call), true);
    due.close();
    assert.equal(table.isLaneHeld('r', entry.lane, entry.call), false);
    // A new call on the freed lane is not the expired one.
    const again = run.openCall(1_000);
    assert.equal(table.isLaneHeld('r', entry.lane, entry.call), false);
    again.close();
    run.close();
  });
});

describe('CancellationTable: bad input', () => {
  it('refuses a capacity of 0, over maxCapacity or over what a buffer can hold, and bad lanes', () => {
    assert.throws(() => new CancellationTable({ capacity: 0 }), isInvalid());
    assert.throws(() => new CancellationTable({ capacity: 10, maxCapacity: 5 }), isInvalid());
    assert.throws(() => new CancellationTable({ capacity: 1.5 }), isInvalid());
    assert.throws(() => new CancellationTable({ capacity: 1, maxCapacity: CancelSlots.MAX_CAPACITY + 1 }), isInvalid());
    assert.throws(() => new CancellationTable({ lanes: 17 }), isInvalid());
    assert.throws(() => new CancellationTable({ lanes: -1 }), isInvalid());
  });

  it('refuses negative and non-finite deadlines at the edge', () => {
    const table = new CancellationTable({ capacity: 2 });
    table.register('r');
    for (const bad of [-1, Number.NaN, Number.POSITIVE_INFINITY, '5' as unknown as number]) {
      assert.throws(() => table.register('x', { deadline: bad }), isInvalid(), String(bad));
      assert.throws(() => table.setDeadline('r', bad), isInvalid(), String(bad));
    }
    assert.throws(() => table.expireLanes(Number.NaN), isInvalid());
    assert.equal(table.has('x'), false, 'a refused registration leaves nothing behind');
  });

  it('refuses an empty or duplicate key and an unknown reason', () => {
    const table = new CancellationTable({ capacity: 2 });
    table.register('r');
    assert.throws(() => table.register(''), isInvalid());
    assert.throws(() => table.register('r'), isInvalid());
    assert.throws(() => table.cancel('r', 'oops' as CancelReason), isInvalid());
    assert.equal(table.size, 1);
  });

  it('refuses a handle or buffer that is not the table’s', () => {
    const table = new CancellationTable({ capacity: 2 });
    const handle = table.register('r');
    assert.throws(() => slotRunCancellation(new SharedArrayBuffer(128), handle), isInvalid());
    assert.throws(() => slotRunCancellation(table.buffer, { index: 99, generation: 1 }), isInvalid());
    assert.throws(() => slotRunCancellation(table.buffer, { index: 0, generation: 0 }), isInvalid());
    const run = slotRunCancellation(table.buffer, handle);
    assert.throws(() => run.openCall(-5), isInvalid());
    assert.throws(() => run.openCall(Number.NaN), isInvalid());
    run.close();
  });
});
