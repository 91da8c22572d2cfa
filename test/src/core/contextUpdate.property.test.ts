import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  type AgentId,
  applyContextUpdate,
  ContextUpdate,
  deepFreeze,
  isTroupeError,
  type Metadata,
  type Operation,
  reduceMetadata,
  type TroupeError,
} from '@troupe/core';
import fc from 'fast-check';

// ---------------------------------------------------------------------------
// The naive reference: copy everything, obvious semantics, no cleverness.
// ---------------------------------------------------------------------------

type Failure = 'protected' | 'not-a-list' | 'merge-value' | 'transcript' | 'unknown';

class NaiveError extends Error {
  constructor(readonly failure: Failure) {
    super(failure);
  }
}

const TRANSCRIPT = ['user_message', 'assistant_message', 'system_message', 'tool_message', 'tool_result'];

function plain(v: unknown): v is Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

function naiveMerge(base: unknown, patch: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (plain(base)) for (const k of Object.keys(base)) out[k] = base[k];
  for (const k of Object.keys(patch)) {
    const next = patch[k];
    const current = out[k];
    out[k] = plain(next) && plain(current) ? naiveMerge(current, next) : next;
  }
  return out;
}

function naiveFold(initial: Record<string, unknown>, ops: readonly unknown[]): Record<string, unknown> {
  let m: Record<string, unknown> = { ...initial };
  for (const raw of ops) {
    const op = raw as { op: string; key: string; type: string; value: unknown };
    switch (op.op) {
      case 'logEvent':
        if (TRANSCRIPT.includes(op.type)) throw new NaiveError('transcript');
        continue;
      case 'set':
      case 'merge':
      case 'append':
      case 'delete':
        if (op.key.startsWith('troupe.')) throw new NaiveError('protected');
        break;
      default:
        throw new NaiveError('unknown');
    }
    switch (op.op) {
      case 'set':
        m = { ...m, [op.key]: op.value };
        break;
      case 'merge':
        if (!plain(op.value)) throw new NaiveError('merge-value');
        m = { ...m, [op.key]: naiveMerge(m[op.key], op.value) };
        break;
      case 'append': {
        const current = m[op.key];
        if (current === undefined || current === null) m = { ...m, [op.key]: [op.value] };
        else if (Array.isArray(current)) m = { ...m, [op.key]: [...current, op.value] };
        else throw new NaiveError('not-a-list');
        break;
      }
      case 'delete': {
        const next: Record<string, unknown> = {};
        for (const k of Object.keys(m)) if (k !== op.key) next[k] = m[k];
        m = next;
        break;
      }
    }
  }
  return m;
}

// ---------------------------------------------------------------------------
// Generators: a small key set so operations collide often.
// ---------------------------------------------------------------------------

const key = fc.constantFrom('a', 'b', 'c', 'troupe.p');
const leaf = fc.oneof(fc.integer({ min: -3, max: 3 }), fc.constant(null), fc.constantFrom('x', 'y'), fc.boolean());
const { value, object } = fc.letrec<{ value: unknown; object: Record<string, unknown> }>((tie) => ({
  value: fc.oneof({ depthSize: 'small', maxDepth: 3 }, leaf, fc.array(tie('value'), { maxLength: 3 }), tie('object')),
  object: fc.dictionary(fc.constantFrom('x', 'y', 'z'), tie('value'), { maxKeys: 3 }),
}));

const operation: fc.Arbitrary<unknown> = fc.oneof(
  { arbitrary: fc.record({ op: fc.constant('set'), key, value }), weight: 3 },
  { arbitrary: fc.record({ op: fc.constant('merge'), key, value: object }), weight: 3 },
  // A merge whose value is not an object: refused by both.
  { arbitrary: fc.record({ op: fc.constant('merge'), key, value: fc.oneof(leaf, fc.array(leaf)) }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constant('append'), key, value }), weight: 4 },
  { arbitrary: fc.record({ op: fc.constant('delete'), key }), weight: 2 },
  {
    arbitrary: fc.record({
      op: fc.constant('logEvent'),
      type: fc.constantFrom('audit', 'sub_dispatch', 'user_message'),
      data: object,
    }),
    weight: 1,
  },
  { arbitrary: fc.record({ op: fc.constantFrom('increment', 'upsert'), key }), weight: 1 },
);

const initialMetadata = fc.dictionary(key, value, { maxKeys: 4, noNullPrototype: true });
const operations = fc.array(operation, { maxLength: 12 });

type Outcome = { ok: true; value: unknown } | { ok: false; failure: Failure };

function naiveOutcome(initial: Record<string, unknown>, ops: readonly unknown[]): Outcome {
  try {
    return { ok: true, value: naiveFold(initial, ops) };
  } catch (error) {
    if (error instanceof NaiveError) return { ok: false, failure: error.failure };
    throw error;
  }
}

// What ContextUpdate's builder refuses before anything is applied: the same
// per-operation checks as the fold, for every operation, up front.
function naiveConstruction(ops: readonly unknown[]): Failure | undefined {
  for (const raw of ops) {
    const op = raw as { op: string; key: string; type: string; value: unknown };
    switch (op.op) {
      case 'logEvent':
        if (TRANSCRIPT.includes(op.type)) return 'transcript';
        break;
      case 'set':
      case 'append':
      case 'delete':
        if (op.key.startsWith('troupe.')) return 'protected';
        break;
      case 'merge':
        if (op.key.startsWith('troupe.')) return 'protected';
        if (!plain(op.value)) return 'merge-value';
        break;
      default:
        return 'unknown';
    }
  }
  return undefined;
}

// The reducer's typed errors, mapped to the reference's failure kinds.
function classify(error: unknown): Failure {
  assert.ok(isTroupeError(error), `expected a TroupeError, got ${String(error)}`);
  const e: TroupeError = error;
  if (e.code === 'ERR_PROTECTED_KEY') return 'protected';
  assert.equal(e.code, 'ERR_CONTEXT_UPDATE');
  if (/^unknown operation/.test(e.message)) return 'unknown';
  if (/not a list/.test(e.message)) return 'not-a-list';
  if (/transcript types/.test(e.message)) return 'transcript';
  if (/plain object/.test(e.message)) return 'merge-value';
  assert.fail(`unclassified error: ${e.message}`);
}

// A deep copy that keeps prototypes (structuredClone turns null-prototype objects into plain ones).
function snapshot<T>(v: T): T {
  if (Array.isArray(v)) return v.map(snapshot) as T;
  if (typeof v !== 'object' || v === null) return v;
  const out = Object.create(Object.getPrototypeOf(v)) as Record<string, unknown>;
  for (const k of Object.keys(v)) out[k] = snapshot((v as Record<string, unknown>)[k]);
  return out as T;
}

function assertDeepFrozen(v: unknown, path = 'metadata'): void {
  if (typeof v !== 'object' || v === null) return;
  assert.ok(Object.isFrozen(v), `${path} is not frozen`);
  for (const k of Object.keys(v)) assertDeepFrozen((v as Record<string, unknown>)[k], `${path}.${k}`);
}

const RUNS = 1_000;

describe('reduceMetadata equals the naive reference fold (property)', () => {
  it(`raw operations, ${RUNS} runs: same result or same failure; the (unfrozen) input is never mutated`, () => {
    fc.assert(
      fc.property(initialMetadata, operations, (generated, ops) => {
        // Work on copies: a reducer that mutated its input must not corrupt
        // the generated values fast-check reuses while shrinking.
        const initial = snapshot(generated);
        const expected = naiveOutcome(generated, ops);
        let actual: Outcome;
        let result: Metadata | undefined;
        try {
          result = reduceMetadata(initial, snapshot(ops) as Operation[]);
          actual = { ok: true, value: result };
        } catch (error) {
          actual = { ok: false, failure: classify(error) };
        }
        assert.deepStrictEqual(actual, expected);
        assert.deepStrictEqual(initial, generated, 'the input metadata was mutated');
        if (result !== undefined && result !== initial) assert.ok(Object.isFrozen(result));
      }),
      { numRuns: RUNS },
    );
  });

  it(`built with ContextUpdate and applied, ${RUNS} runs: construction and apply refuse what the reference refuses; output deep-frozen`, () => {
    fc.assert(
      fc.property(initialMetadata, operations, (raw, rawOps) => {
        // Metadata as the loop holds it: deep-frozen (the output of an earlier fold).
        const initial = deepFreeze(snapshot(raw));
        const ops = snapshot(rawOps);
        const refused = naiveConstruction(ops);
        const expected: Outcome = refused === undefined ? naiveOutcome(initial, ops) : { ok: false, failure: refused };
        let actual: Outcome;
        try {
          const update = ContextUpdate.from(ops);
          const applied = applyContextUpdate(
            update,
            { metadata: initial, log: [] },
            { agentId: 'agent_p' as AgentId, at: 0 },
          );
          actual = { ok: true, value: applied.metadata };
          assertDeepFrozen(applied.metadata);
          assert.deepStrictEqual(
            applied.events.map((e) => e.type),
            (ops as { op: string; type?: string }[]).filter((o) => o.op === 'logEvent').map((o) => o.type),
          );
        } catch (error) {
          actual = { ok: false, failure: classify(error) };
        }
        assert.deepStrictEqual(actual, expected);
        assert.deepStrictEqual(initial, raw, 'the input metadata was mutated');
      }),
      { numRuns: RUNS },
    );
  });

  it(`folding in two halves equals folding at once, ${RUNS} runs`, () => {
    fc.assert(
      fc.property(initialMetadata, operations, fc.nat(12), (initial, ops, cut) => {
        const expected = naiveOutcome(initial, ops);
        fc.pre(expected.ok);
        const at = Math.min(cut, ops.length);
        const first = reduceMetadata(initial, ops.slice(0, at) as Operation[]);
        const second = reduceMetadata(first, ops.slice(at) as Operation[]);
        assert.deepStrictEqual(second, expected.value);
      }),
      { numRuns: RUNS },
    );
  });

  it('the generators reach every outcome (guards against a vacuous property)', () => {
    const seen = new Set<string>();
    fc.assert(
      fc.property(initialMetadata, operations, (initial, ops) => {
        const outcome = naiveOutcome(initial, ops);
        seen.add(outcome.ok ? 'ok' : outcome.failure);
      }),
      { numRuns: RUNS, seed: 42 },
    );
    assert.deepEqual([...seen].sort(), ['merge-value', 'not-a-list', 'ok', 'protected', 'transcript', 'unknown']);
  });
});
