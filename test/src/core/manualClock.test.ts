import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock } from '@troupe/core/testing';

describe('ManualClock', () => {
  it('starts at the given time and moves only when told', () => {
    const clock = new ManualClock(1_000);
    assert.equal(clock.now(), 1_000);
    assert.equal(clock.now(), 1_000);
    clock.advance(250);
    assert.equal(clock.now(), 1_250);
    assert.equal(new ManualClock().now(), 1_700_000_000_000);
  });

  it('fires timers in time order on advance, ties in scheduling order', () => {
    const clock = new ManualClock(0);
    const fired: string[] = [];
    clock.setTimeout(() => fired.push('c@30'), 30);
    clock.setTimeout(() => fired.push('a@10'), 10);
    clock.setTimeout(() => fired.push('b1@20'), 20);
    clock.setTimeout(() => fired.push('b2@20'), 20);
    clock.advance(15);
    assert.deepEqual(fired, ['a@10']);
    clock.advance(15);
    assert.deepEqual(fired, ['a@10', 'b1@20', 'b2@20', 'c@30']);
    assert.equal(clock.pendingTimers, 0);
  });

  it('a timer sees the time it was due, not the target of the advance', () => {
    const clock = new ManualClock(0);
    const seen: number[] = [];
    clock.setTimeout(() => seen.push(clock.now()), 10);
    clock.setTimeout(() => seen.push(clock.now()), 40);
    clock.advance(100);
    assert.deepEqual(seen, [10, 40]);
    assert.equal(clock.now(), 100);
  });

  it('a timer scheduled by a timer fires in the same advance when due', () => {
    const clock = new ManualClock(0);
    const fired: number[] = [];
    clock.setTimeout(() => {
      fired.push(clock.now());
      clock.setTimeout(() => fired.push(clock.now()), 5);
    }, 10);
    clock.advance(12);
    assert.deepEqual(fired, [10]);
    clock.advance(3);
    assert.deepEqual(fired, [10, 15]);
  });

  it('clearTimeout cancels a timer; clearing a fired or unknown handle is ignored', () => {
    const clock = new ManualClock(0);
    const fired: string[] = [];
    const a = clock.setTimeout(() => fired.push('a'), 10);
    clock.setTimeout(() => fired.push('b'), 10);
    assert.equal(clock.pendingTimers, 2);
    clock.clearTimeout(a);
    assert.equal(clock.pendingTimers, 1);
    clock.advance(10);
    assert.deepEqual(fired, ['b']);
    clock.clearTimeout(a);
    clock.clearTimeout(12345);
    assert.equal(clock.pendingTimers, 0);
  });

  it('a timer cleared by an earlier timer in the same advance does not fire', () => {
    const clock = new ManualClock(0);
    const fired: string[] = [];
    let later: unknown;
    clock.setTimeout(() => {
      fired.push('first');
      clock.clearTimeout(later);
    }, 5);
    later = clock.setTimeout(() => fired.push('later'), 10);
    clock.advance(20);
    assert.deepEqual(fired, ['first']);
  });

  it('zero and negative delays fire on the next advance, even advance(0)', () => {
    const clock = new ManualClock(0);
    const fired: string[] = [];
    clock.setTimeout(() => fired.push('zero'), 0);
    clock.setTimeout(() => fired.push('negative'), -5);
    assert.deepEqual(fired, [], 'never synchronously');
    clock.advance(0);
    assert.deepEqual(fired, ['zero', 'negative']);
  });

  it('handles are distinct', () => {
    const clock = new ManualClock(0);
    const handles = new Set(Array.from({ length: 10 }, () => clock.setTimeout(() => {}, 1)));
    assert.equal(handles.size, 10);
  });
});

describe('ManualClock: bad input', () => {
  it('time never goes back: a negative or non-finite advance is refused', () => {
    const clock = new ManualClock(100);
    for (const ms of [-1, Number.NaN, Number.POSITIVE_INFINITY]) {
      assert.throws(() => clock.advance(ms), { code: 'ERR_INVALID_ARGUMENT' }, String(ms));
    }
    assert.equal(clock.now(), 100);
  });

  it('a NaN delay fires on the next advance like 0 (as the global setTimeout does)', () => {
    const clock = new ManualClock(0);
    let fired = false;
    clock.setTimeout(() => {
      fired = true;
    }, Number.NaN);
    clock.advance(0);
    assert.equal(fired, true);
    assert.equal(clock.pendingTimers, 0);
  });
});
