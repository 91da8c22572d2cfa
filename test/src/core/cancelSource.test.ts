import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CancelledError, CancelSource, neverCancelled } from '@troupe/core';
import { localRunCancellation } from '@troupe/core/internal';
import { afterWakeups } from '../fixtures/afterWakeups.js';

function isCancelledWith(reason: string) {
  return (e: unknown): boolean => e instanceof CancelledError && e.reason === reason && e.code === 'ERR_CANCELLED';
}

describe('CancelSource: four ways', () => {
  it('already cancelled: every view says so from the start', () => {
    const source = new CancelSource();
    source.cancel('user');
    assert.equal(source.isCancelled(), true);
    assert.equal(source.reason, 'user');
    assert.throws(() => source.throwIfCancelled(), isCancelledWith('user'));
    // The signal is created after the cancel: it must be born aborted.
    assert.equal(source.signal.aborted, true);
    assert.ok(isCancelledWith('user')(source.signal.reason));
  });

  it('cancelled while running: a waiting listener is woken with the reason', async () => {
    const source = new CancelSource();
    const { signal } = source;
    assert.equal(signal.aborted, false);
    assert.equal(source.isCancelled(), false);
    assert.doesNotThrow(() => source.throwIfCancelled());
    const woken = new Promise<unknown>((resolve) => signal.addEventListener('abort', () => resolve(signal.reason)));
    assert.equal(source.cancel('deadline'), true);
    assert.ok(isCancelledWith('deadline')(await woken));
    assert.equal(source.isCancelled(), true);
  });

  it('cancelled after completion has no effect on what already finished', async () => {
    const source = new CancelSource();
    const work = async (): Promise<string> => {
      source.throwIfCancelled();
      return 'done';
    };
    const result = await work();
    let aborts = 0;
    source.signal.addEventListener('abort', () => aborts++);
    source.cancel('user');
    assert.equal(result, 'done');
    // A second cancel changes nothing: reason and abort count stay.
    assert.equal(source.cancel('shutdown'), false);
    assert.equal(source.reason, 'user');
    assert.equal(aborts, 1);
  });

  it('no sharing between instances', () => {
    const a = new CancelSource();
    const b = new CancelSource();
    a.cancel('user');
    assert.equal(a.isCancelled(), true);
    assert.equal(b.isCancelled(), false);
    assert.equal(b.signal.aborted, false);
    assert.notEqual(a.signal, b.signal);
  });

  it('the token is the source itself, and the signal is created once', () => {
    const source = new CancelSource();
    assert.equal(source.token, source);
    assert.equal(source.signal, source.signal);
  });
});

describe('CancelSource: children', () => {
  it('a child is cancelled with reason parent when its parent is, grandchildren too', () => {
    const root = new CancelSource();
    const child = root.child();
    const grandchild = child.child();
    const childAborted = new Promise<boolean>((resolve) => child.signal.addEventListener('abort', () => resolve(true)));
    root.cancel('user');
    assert.equal(root.reason, 'user');
    assert.equal(child.reason, 'parent');
    assert.equal(grandchild.reason, 'parent');
    assert.equal(grandchild.signal.aborted, true);
    return childAborted.then((aborted) => assert.equal(aborted, true));
  });

  it('cancelling a child leaves the parent and siblings running', () => {
    const root = new CancelSource();
    const a = root.child();
    const b = root.child();
    a.cancel('deadline');
    assert.equal(a.reason, 'deadline');
    assert.equal(root.isCancelled(), false);
    assert.equal(b.isCancelled(), false);
  });

  it('a child of a cancelled source is born cancelled', () => {
    const root = new CancelSource();
    root.cancel('shutdown');
    const late = root.child();
    assert.equal(late.isCancelled(), true);
    assert.equal(late.reason, 'parent');
  });

  it('a disposed child no longer follows its parent', () => {
    const root = new CancelSource();
    const child = root.child();
    child.dispose();
    child.dispose(); // idempotent
    root.cancel('user');
    assert.equal(child.isCancelled(), false);
  });

  it('many children are all reached', () => {
    const root = new CancelSource();
    const children = Array.from({ length: 100 }, () => root.child());
    root.cancel('user');
    assert.ok(children.every((c) => c.reason === 'parent'));
  });
});

describe('localRunCancellation', () => {
  it('carries the run token and deadline', () => {
    const source = new CancelSource();
    const run = localRunCancellation(source, 1234);
    assert.equal(run.token, source);
    assert.equal(run.deadline, 1234);
    assert.equal(localRunCancellation().deadline, undefined);
  });

  it('a call token follows the run, but cancelling the call leaves the run alone', () => {
    const source = new CancelSource();
    const run = localRunCancellation(source);
    const one = run.openCall(undefined);
    const two = run.openCall(undefined);
    one.cancel('deadline');
    assert.equal(one.token.reason, 'deadline');
    assert.equal(one.token.signal.aborted, true);
    assert.equal(source.isCancelled(), false);
    assert.equal(two.token.isCancelled(), false);
    source.cancel('user');
    assert.equal(two.token.reason, 'parent');
  });

  it('a closed call is no longer cancelled by the run', () => {
    const source = new CancelSource();
    const run = localRunCancellation(source);
    const call = run.openCall(undefined);
    call.close();
    call.close(); // idempotent
    source.cancel('user');
    assert.equal(call.token.isCancelled(), false);
  });
});

describe('neverCancelled', () => {
  it('is never cancelled and never throws', () => {
    assert.equal(neverCancelled.isCancelled(), false);
    assert.equal(neverCancelled.reason, undefined);
    assert.doesNotThrow(() => neverCancelled.throwIfCancelled());
    assert.equal(neverCancelled.signal.aborted, false);
    assert.ok(Object.isFrozen(neverCancelled));
  });
});

describe('CancelSource: whenCancelled()', () => {
  it('resolves with the reason (parent for a child), at once when already cancelled; never for neverCancelled', async () => {
    const parent = new CancelSource();
    const child = parent.child();
    const own = parent.whenCancelled();
    const below = child.whenCancelled();
    assert.equal(parent.whenCancelled(), own, 'one promise per source');
    parent.cancel('user');
    assert.equal(await own, 'user');
    assert.equal(await below, 'parent');
    assert.equal(await parent.whenCancelled(), 'user');
    let never: unknown = 'pending';
    neverCancelled.whenCancelled().then((reason) => {
      never = reason;
    });
    await afterWakeups();
    assert.equal(never, 'pending');
  });
});
