import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { CallCancellation, CancelReason } from '@troupe/core';
import { type SlotHandle, type SlotRunCancellation, slotRunCancellation } from '@troupe/core/internal';
import { CancellationTable, type ExpiredEntry } from '@troupe/supervisor/internal';
import fc from 'fast-check';

// Random sequences of register / cancel / release / expireLanes and of call
// open / cancel / close, checked after every step against a plain model of
// the slots: no cancel lost, none leaking to another run, the first reason
// kept, no stale cancel after a slot is reused, deadlines as set, one call
// cancelled alone. A small table (2 slots, 2 lanes) makes growth, slot reuse
// and the all-lanes-busy fallback frequent. (The table holds slots only: what
// a cancel reaches is the run tree's walk, checked in supervisor/runTree*.)

const LANES = 2;
const reason = fc.constantFrom<CancelReason>('user', 'parent', 'deadline', 'shutdown');
const deadline = fc.constantFrom(undefined, 10, 20, 30);
const pick = fc.nat({ max: 1_000 });

type Command =
  | { readonly t: 'register'; readonly deadline: number | undefined }
  | { readonly t: 'release'; readonly pick: number }
  | { readonly t: 'cancel'; readonly pick: number; readonly reason: CancelReason }
  | { readonly t: 'cancelReleased'; readonly pick: number }
  | { readonly t: 'expire'; readonly now: number }
  | { readonly t: 'setDeadline'; readonly pick: number; readonly deadline: number | undefined }
  | { readonly t: 'open'; readonly pick: number; readonly deadline: number | undefined }
  | { readonly t: 'cancelCall'; readonly pick: number; readonly reason: CancelReason }
  | { readonly t: 'closeCall'; readonly pick: number };

const command: fc.Arbitrary<Command> = fc.oneof(
  {
    arbitrary: fc.record({
      t: fc.constant('register' as const),
      deadline,
    }),
    weight: 4,
  },
  { arbitrary: fc.record({ t: fc.constant('release' as const), pick }), weight: 2 },
  { arbitrary: fc.record({ t: fc.constant('cancel' as const), pick, reason }), weight: 2 },
  { arbitrary: fc.record({ t: fc.constant('cancelReleased' as const), pick }), weight: 1 },
  { arbitrary: fc.record({ t: fc.constant('expire' as const), now: fc.constantFrom(5, 15, 25, 35) }), weight: 1 },
  { arbitrary: fc.record({ t: fc.constant('setDeadline' as const), pick, deadline }), weight: 1 },
  { arbitrary: fc.record({ t: fc.constant('open' as const), pick, deadline }), weight: 3 },
  { arbitrary: fc.record({ t: fc.constant('cancelCall' as const), pick, reason }), weight: 2 },
  { arbitrary: fc.record({ t: fc.constant('closeCall' as const), pick }), weight: 2 },
);

interface ModelRun {
  reason: CancelReason | undefined;
  deadline: number | undefined;
  lanesUsed: number;
  readonly run: SlotRunCancellation;
}

interface ModelCall {
  readonly key: string;
  readonly real: CallCancellation;
  readonly laned: boolean;
  readonly deadline: number | undefined;
  reason: CancelReason | undefined;
  closed: boolean;
}

function check(commands: readonly Command[]): void {
  const table = new CancellationTable({ capacity: 2, maxCapacity: 64, lanes: LANES });
  const runs = new Map<string, ModelRun>();
  const calls: ModelCall[] = [];
  const released: { key: string; handle: SlotHandle }[] = [];
  let next = 0;

  const live = (): string[] => [...runs.keys()];
  const cancelModel = (key: string, why: CancelReason): boolean => {
    const node = runs.get(key);
    if (node === undefined || node.reason !== undefined) return false;
    node.reason = why;
    for (const call of calls) if (call.key === key && !call.closed && call.reason === undefined) call.reason = why;
    return true;
  };

  const verify = (step: string): void => {
    assert.equal(table.size, runs.size, step);
    for (const [key, node] of runs) {
      assert.equal(table.reason(key), node.reason, `${step}: table.reason(${key})`);
      assert.equal(table.isCancelled(key), node.reason !== undefined, `${step}: table.isCancelled(${key})`);
      assert.equal(node.run.token.reason, node.reason, `${step}: token of ${key}`);
      assert.equal(node.run.token.isCancelled(), node.reason !== undefined, `${step}: token of ${key}`);
      assert.equal(table.deadlineOf(key), node.deadline, `${step}: deadline of ${key}`);
    }
    calls.forEach((call, i) => {
      assert.equal(call.real.token.reason, call.reason, `${step}: call ${i} of ${call.key}`);
      assert.equal(call.real.token.isCancelled(), call.reason !== undefined, `${step}: call ${i} of ${call.key}`);
    });
    for (const { handle } of released) {
      assert.notEqual(table.slots.runReason(handle), undefined, `${step}: a released handle never reads live`);
    }
  };

  commands.forEach((c, i) => {
    const step = `step ${i} ${JSON.stringify(c)}`;
    const keys = live();
    switch (c.t) {
      case 'register': {
        const key = `k${next++}`;
        const registered = table.register(key, { deadline: c.deadline });
        const node: ModelRun = {
          reason: undefined,
          deadline: c.deadline,
          lanesUsed: 0,
          run: slotRunCancellation(table.slots, registered),
        };
        assert.equal(registered.deadline, node.deadline, step);
        runs.set(key, node);
        break;
      }
      case 'release': {
        if (keys.length === 0) return;
        const key = keys[c.pick % keys.length] as string;
        const node = runs.get(key) as ModelRun;
        const handle = table.handle(key) as SlotHandle;
        // The run ends: its worker closes its cancellation (and open calls), then the slot is released.
        node.run.close();
        for (const call of calls) if (call.key === key) call.closed = true;
        assert.equal(table.release(key), true, step);
        runs.delete(key);
        released.push({ key, handle });
        break;
      }
      case 'cancel': {
        if (keys.length === 0) {
          assert.equal(table.cancel('never-registered', c.reason), false, step);
          return;
        }
        const key = keys[c.pick % keys.length] as string;
        assert.equal(table.cancel(key, c.reason), cancelModel(key, c.reason), step);
        break;
      }
      case 'cancelReleased': {
        if (released.length === 0) return;
        const { key, handle } = released[c.pick % released.length] as { key: string; handle: SlotHandle };
        assert.equal(table.cancel(key, 'user'), false, step);
        assert.equal(table.slots.cancelRun(handle, 'user'), false, `${step}: a cancel aimed at an old generation`);
        break;
      }
      case 'expire': {
        // A run's own deadline passing cancels nothing here (the tree cancels the run); a call's lane does.
        let lanes = 0;
        for (const call of calls) {
          if (
            call.laned &&
            !call.closed &&
            call.reason === undefined &&
            call.deadline !== undefined &&
            call.deadline <= c.now
          ) {
            call.reason = 'deadline';
            lanes++;
          }
        }
        const actual: ExpiredEntry[] = table.expireLanes(c.now);
        assert.equal(actual.length, lanes, step);
        assert.ok(
          actual.every((e) => e.kind === 'lane' && runs.has(e.key)),
          step,
        );
        break;
      }
      case 'setDeadline': {
        if (keys.length === 0) return;
        const key = keys[c.pick % keys.length] as string;
        const node = runs.get(key) as ModelRun;
        node.deadline = c.deadline;
        assert.equal(table.setDeadline(key, c.deadline), true, step);
        break;
      }
      case 'open': {
        if (keys.length === 0) return;
        const key = keys[c.pick % keys.length] as string;
        const node = runs.get(key) as ModelRun;
        // Only a call with a deadline takes a lane (the watchdog cancels lanes for their deadline only).
        const laned = c.deadline !== undefined && node.lanesUsed < LANES;
        if (laned) node.lanesUsed++;
        calls.push({
          key,
          real: node.run.openCall(c.deadline),
          laned,
          deadline: c.deadline,
          reason: node.reason,
          closed: false,
        });
        break;
      }
      case 'cancelCall': {
        const open = calls.filter((call) => !call.closed);
        const call = open.length === 0 ? calls[c.pick % Math.max(1, calls.length)] : open[c.pick % open.length];
        if (call === undefined) return;
        call.real.cancel(c.reason);
        if (!call.closed && call.reason === undefined) call.reason = c.reason;
        break;
      }
      case 'closeCall': {
        const open = calls.filter((call) => !call.closed);
        if (open.length === 0) return;
        const call = open[c.pick % open.length] as ModelCall;
        call.real.close();
        call.closed = true;
        if (call.laned) (runs.get(call.key) as ModelRun).lanesUsed--;
        break;
      }
    }
    verify(step);
  });
  for (const node of runs.values()) node.run.close();
}

describe('CancellationTable: properties', () => {
  it('matches a model of the slots on random allocate / cancel / release / expireLanes / call sequences', () => {
    fc.assert(
      fc.property(fc.array(command, { maxLength: 60, size: 'medium' }), (commands) => check(commands)),
      { numRuns: 1_000 },
    );
  });
});
