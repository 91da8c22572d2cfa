import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isTroupeError } from '@troupe/core';
import { slotRunCancellation } from '@troupe/core/internal';
import { ManualClock } from '@troupe/core/testing';
import { CancellationTable, Watchdog, type WatchdogKillCause } from '@troupe/supervisor/internal';

// Time is driven by a ManualClock: no sleeps. The watchdog ticks every 10 ms.

function setup(graceMs = 100) {
  const clock = new ManualClock(1_000_000);
  const table = new CancellationTable({ clock, capacity: 8 });
  const kills: [string, WatchdogKillCause, number][] = [];
  const watchdog = new Watchdog({
    table,
    clock,
    graceMs,
    intervalMs: 10,
    kill: (key, cause) => kills.push([key, cause, clock.now()]),
  });
  return { clock, table, watchdog, kills };
}

describe('Watchdog', () => {
  it('runs a timer only while something is tracked (it stops at the first tick with nothing tracked)', () => {
    const { clock, table, watchdog } = setup();
    table.register('a');
    table.register('b');
    assert.equal(clock.pendingTimers, 0);
    watchdog.track('a');
    watchdog.track('b');
    watchdog.track('a');
    assert.equal(clock.pendingTimers, 1);
    clock.advance(50);
    assert.equal(clock.pendingTimers, 1);
    watchdog.untrack('a');
    assert.equal(clock.pendingTimers, 1);
    assert.equal(watchdog.untrack('b'), true);
    // Not cleared at once (a run arriving right after would re-arm it): it lapses at its next tick.
    assert.equal(clock.pendingTimers, 1);
    clock.advance(10);
    assert.equal(clock.pendingTimers, 0);
    assert.equal(watchdog.untrack('b'), false);
  });

  it('kills a run still going after the grace period once it is cancelled (the tree cancels it at its deadline)', () => {
    const { clock, table, watchdog, kills } = setup(100);
    table.register('slow', { deadline: clock.now() + 50 });
    watchdog.track('slow');
    clock.advance(40);
    assert.equal(table.isCancelled('slow'), false, "a run deadline is the tree's to enforce, not the watchdog's");
    clock.advance(10);
    // The tree's cancel at the deadline, as the transport passes it on: the grace period starts now.
    table.cancel('slow', 'deadline');
    watchdog.cancelled('slow');
    assert.deepEqual(kills, []);
    clock.advance(100);
    assert.deepEqual(kills, [], 'not before the grace period is over');
    clock.advance(10);
    assert.deepEqual(kills, [['slow', { kind: 'cancelled', reason: 'deadline' }, 1_000_160]]);
    assert.equal(watchdog.size, 0, 'a killed run is untracked');
    assert.equal(clock.pendingTimers, 0);
  });

  it('does not kill a run that stops within the grace period', () => {
    const { clock, table, watchdog, kills } = setup(100);
    table.register('polite');
    watchdog.track('polite');
    table.cancel('polite', 'user');
    watchdog.cancelled('polite');
    clock.advance(90);
    watchdog.untrack('polite');
    table.release('polite');
    clock.advance(1_000);
    assert.deepEqual(kills, []);
  });

  it('cancelled(key) starts the grace period at once for user, parent and shutdown cancels', () => {
    const { clock, table, watchdog, kills } = setup(100);
    table.register('p');
    table.register('c');
    watchdog.track('p');
    watchdog.track('c');
    clock.advance(5);
    // The tree's push-down: the run with its reason, its child with `parent`.
    table.cancel('p', 'shutdown');
    table.cancel('c', 'parent');
    watchdog.cancelled('p');
    watchdog.cancelled('c');
    watchdog.cancelled('untracked');
    clock.advance(100);
    assert.equal(kills.length, 0);
    clock.advance(10);
    assert.deepEqual(
      kills.map(([key, cause]) => [key, cause]),
      [
        ['p', { kind: 'cancelled', reason: 'shutdown' }],
        ['c', { kind: 'cancelled', reason: 'parent' }],
      ],
    );
  });

  it('cancels a call whose lane deadline passed, and kills its run if the call is still held after the grace period', () => {
    const { clock, table, watchdog, kills } = setup(100);
    const run = slotRunCancellation(table.buffer, table.register('r'), { clock });
    const spinning = run.openCall(clock.now() + 30);
    const fine = run.openCall(clock.now() + 10_000);
    watchdog.track('r');
    clock.advance(30);
    assert.equal(spinning.token.reason, 'deadline');
    assert.equal(fine.token.isCancelled(), false);
    assert.equal(run.token.isCancelled(), false, 'the run goes on');
    clock.advance(100);
    assert.deepEqual(kills, []);
    clock.advance(10);
    assert.deepEqual(kills, [['r', { kind: 'lane-timeout', lane: 0 }, 1_000_140]]);
    run.close();
  });

  it('does not kill for a lane whose call returned within the grace period', () => {
    const { clock, table, watchdog, kills } = setup(100);
    const run = slotRunCancellation(table.buffer, table.register('r'), { clock });
    const call = run.openCall(clock.now() + 30);
    watchdog.track('r');
    clock.advance(50);
    assert.equal(call.token.reason, 'deadline');
    call.close();
    // The next call on the same lane is not the timed-out one.
    const next = run.openCall(undefined);
    clock.advance(500);
    assert.deepEqual(kills, []);
    next.close();
    run.close();
  });

  it('forgets a run released without untrack', () => {
    const { clock, table, watchdog } = setup();
    table.register('gone');
    watchdog.track('gone');
    table.release('gone');
    clock.advance(10);
    assert.equal(watchdog.size, 0);
    assert.equal(clock.pendingTimers, 0);
  });

  it('rethrows a throwing kill after rescheduling, and still kills the others', () => {
    const clock = new ManualClock(0);
    const table = new CancellationTable({ clock, capacity: 4 });
    const killed: string[] = [];
    const watchdog = new Watchdog({
      table,
      clock,
      graceMs: 0,
      kill: (key) => {
        killed.push(key);
        if (key === 'bad') throw new Error('kill failed');
      },
    });
    table.register('bad');
    table.register('good');
    table.register('live');
    watchdog.track('bad');
    watchdog.track('good');
    watchdog.track('live');
    table.cancel('bad', 'user');
    table.cancel('good', 'user');
    watchdog.cancelled('bad');
    watchdog.cancelled('good');
    assert.throws(() => clock.advance(10), /kill failed/);
    assert.deepEqual(killed, ['bad', 'good']);
    assert.equal(clock.pendingTimers, 1, 'still watching the live run');
    watchdog.close();
  });

  it('close() stops the timer; use after close throws', () => {
    const { clock, table, watchdog } = setup();
    table.register('a');
    watchdog.track('a');
    watchdog.close();
    watchdog.close();
    assert.equal(clock.pendingTimers, 0);
    assert.throws(
      () => watchdog.track('a'),
      (error: unknown) => isTroupeError(error, 'ERR_CLOSED'),
    );
  });

  it('refuses bad options and unknown runs', () => {
    const { table, watchdog } = setup();
    const kill = () => {};
    const invalid = (error: unknown) => isTroupeError(error, 'ERR_INVALID_ARGUMENT');
    assert.throws(() => new Watchdog({ table, graceMs: -1, kill }), invalid);
    assert.throws(() => new Watchdog({ table, graceMs: Number.NaN, kill }), invalid);
    assert.throws(() => new Watchdog({ table, graceMs: 10, intervalMs: 0, kill }), invalid);
    assert.throws(() => new Watchdog({ table, graceMs: 10, kill: 5 as unknown as typeof kill }), invalid);
    assert.throws(
      () => watchdog.track('nobody'),
      (error: unknown) => isTroupeError(error, 'ERR_UNKNOWN_AGENT'),
    );
  });
});
