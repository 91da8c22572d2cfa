import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { CallCancellation, CancelReason } from '@troupe/core';
import { type SlotHandle, type SlotRunCancellation, slotRunCancellation } from '@troupe/core/internal';
import { CancellationTable, type ExpiredEntry } from '@troupe/supervisor/internal';
import fc from 'fast-check';

// Random sequences of register / cancel / release / expire and of call
// open / cancel / close, checked after every step against a plain model of
// the tree: no cancel lost, none leaking to a sibling or a parent, the first
// reason kept, no stale cancel after a slot is reused, deadlines capped by the
// parent (also after setDeadline), one call cancelled alone. A small table (2 slots, 2 lanes) makes
// growth, slot reuse and the all-lanes-busy fallback frequent.

const LANES = 2;
const reason = fc.constantFrom<CancelReason>('user', 'parent', 'deadline', 'shutdown');
const deadline = fc.constantFrom(undefined, 10, 20, 30);
const pick = fc.nat({ max: 1_000 });

type Command =
  | { readonly t: 'register'; readonly parent: number; readonly deadline: number | undefined }
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
      parent: fc.integer({ min: -1, max: 1_000 }),
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
  parent: string | undefined;
  readonly children: Set<string>;
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

function min(a: number | undefined, b: number | undefined): number | undefined {
  return a === undefined ? b : b === undefined ? a : Math.min(a, b);
}

function check(commands: readonly Command[]): void {
  const table = new CancellationTable({ capacity: 2, maxCapacity: 64, lanes: LANES });
  const runs = new Map<string, ModelRun>();
  const withDeadline: string[] = []; // insertion order, as the table iterates
  const calls: ModelCall[] = [];
  const released: { key: string; handle: SlotHandle }[] = [];
  let next = 0;

  const live = (): string[] => [...runs.keys()];
  const cancelModel = (key: string, why: CancelReason, out?: ExpiredEntry[]): boolean => {
    const root = runs.get(key);
    if (root === undefined || root.reason !== undefined) return false;
    const mark = (k: string, r: CancelReason): void => {
      const node = runs.get(k) as ModelRun;
      node.reason = r;
      out?.push({ kind: 'run', key: k, reason: r === 'deadline' ? 'deadline' : 'parent' });
      for (const call of calls) if (call.key === k && !call.closed && call.reason === undefined) call.reason = r;
    };
    mark(key, why);
    const stack = [...root.children];
    for (let k = stack.pop(); k !== undefined; k = stack.pop()) {
      const node = runs.get(k) as ModelRun;
      if (node.reason !== undefined) continue;
      mark(k, 'parent');
      stack.push(...node.children);
    }
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
        const parent = c.parent < 0 || keys.length === 0 ? undefined : keys[c.parent % keys.length];
        const parentNode = parent === undefined ? undefined : runs.get(parent);
        const registered = table.register(key, { parent, deadline: c.deadline });
        let inherited = false;
        for (let up = parent; up !== undefined; up = runs.get(up)?.parent) {
          if (runs.get(up)?.reason !== undefined) inherited = true;
        }
        const node: ModelRun = {
          parent,
          children: new Set(),
          reason: inherited ? 'parent' : undefined,
          deadline: min(c.deadline, parentNode?.deadline),
          lanesUsed: 0,
          run: slotRunCancellation(table.slots, registered),
        };
        assert.equal(registered.deadline, node.deadline, step);
        runs.set(key, node);
        parentNode?.children.add(key);
        if (node.deadline !== undefined) withDeadline.push(key);
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
        const at = withDeadline.indexOf(key);
        if (at >= 0) withDeadline.splice(at, 1);
        const parentNode = node.parent === undefined ? undefined : runs.get(node.parent);
        parentNode?.children.delete(key);
        for (const child of node.children) {
          (runs.get(child) as ModelRun).parent = node.parent;
          parentNode?.children.add(child);
        }
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
        const expected: ExpiredEntry[] = [];
        for (const key of withDeadline) {
          const node = runs.get(key) as ModelRun;
          if (node.deadline !== undefined && node.deadline <= c.now && node.reason === undefined) {
            cancelModel(key, 'deadline', expected);
          }
        }
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
        const actual = table.expire(c.now);
        assert.deepEqual(
          actual.filter((e) => e.kind === 'run'),
          expected,
          step,
        );
        assert.equal(actual.filter((e) => e.kind === 'lane').length, lanes, step);
        break;
      }
      case 'setDeadline': {
        if (keys.length === 0) return;
        const key = keys[c.pick % keys.length] as string;
        const node = runs.get(key) as ModelRun;
        // Mirror the table: capped by the parent, later descendants brought forward
        // (depth-first, last child first), the deadline set kept in insertion order.
        const setTo = (k: string, n: ModelRun, d: number | undefined): void => {
          n.deadline = d;
          const at = withDeadline.indexOf(k);
          if (d === undefined && at >= 0) withDeadline.splice(at, 1);
          if (d !== undefined && at < 0) withDeadline.push(k);
        };
        setTo(key, node, min(c.deadline, node.parent === undefined ? undefined : runs.get(node.parent)?.deadline));
        const cap = node.deadline;
        if (cap !== undefined) {
          const stack = [...node.children];
          for (let k = stack.pop(); k !== undefined; k = stack.pop()) {
            const child = runs.get(k) as ModelRun;
            if (child.deadline !== undefined && child.deadline <= cap) continue;
            setTo(k, child, cap);
            stack.push(...child.children);
          }
        }
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
  it('matches a model of the tree on random allocate / cancel / release / expire / call sequences', () => {
    fc.assert(
      fc.property(fc.array(command, { maxLength: 60, size: 'medium' }), (commands) => check(commands)),
      { numRuns: 1_000 },
    );
  });
});
