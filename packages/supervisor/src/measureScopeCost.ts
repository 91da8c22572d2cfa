import { performance } from 'node:perf_hooks';
import { serialize } from 'node:v8';
import {
  type Agent,
  assertCloneable,
  DEFAULT_SCOPE_BUDGET_BYTES,
  deepFreeze,
  defineAgent,
  InvalidArgumentError,
  type Model,
  TroupeError,
} from '@troupe/core';
import { irregularKeys } from '@troupe/core/internal';
import { z } from 'zod';
import { quantile } from './internal/quantile.js';
import { createSupervisor, Supervisor } from './Supervisor.js';

/**
 * The longest chain {@link measureScopeCost} runs: `hops` is 1..8.
 *
 * @example
 * ```ts
 * const cost = await measureScopeCost({ tenantId: 't1' }, { hops: MAX_MEASURED_HOPS, samples: 5 })
 * ```
 */
export const MAX_MEASURED_HOPS = 8;

/**
 * Options of {@link measureScopeCost}; validated once.
 *
 * @example
 * ```ts
 * const options: MeasureScopeCostOptions = { hops: 2, samples: 50, newScopeSamples: 0, signal: AbortSignal.timeout(60_000) }
 * const cost = await measureScopeCost({ tenantId: 't1', userId: 'u1' }, options)
 * ```
 */
export interface MeasureScopeCostOptions {
  /**
   * Thread hops per measured run (1..8, default 1): 1 is host → subagent; n is
   * a chain of n subagents, each delegating to the next with its `task` tool.
   */
  readonly hops?: number;
  /** Timed runs (default 30). */
  readonly samples?: number;
  /**
   * Untimed runs first, so modules are loaded and every thread's code is
   * optimised (default 200: with 3, a fresh pool still runs interpreted code
   * and reports several times the steady cost).
   */
  readonly warmup?: number;
  /**
   * Timed runs that each carry a copy of the scope never seen before (default
   * 10; 0 skips them): what a daemon pays when every request brings a new
   * scope object — sealed at the edge (checked, frozen, measured), and from
   * 8 KiB serialized once and decoded once per worker.
   */
  readonly newScopeSamples?: number;
  /** The budget the size is reported against (default 4096, the supervisor's default). */
  readonly budgetBytes?: number;
  /**
   * Measure on this supervisor's pool instead of a private one. Its pool needs
   * at least `hops` threads (each link of the chain holds one while its child
   * runs) and its scope budget must admit the scope.
   */
  readonly supervisor?: Supervisor;
  /** Aborting it cancels the run in flight and rejects with the signal's reason. */
  readonly signal?: AbortSignal;
}

/**
 * Median and 95th percentile of a sample, in µs.
 *
 * @example
 * ```ts
 * const { perHopUs }: { perHopUs: ScopeCostQuantiles } = await measureScopeCost({ tenantId: 't1' })
 * console.log(`median ${perHopUs.median} µs, p95 ${perHopUs.p95} µs`)
 * ```
 */
export interface ScopeCostQuantiles {
  readonly median: number;
  readonly p95: number;
}

/**
 * What one top-level key of a scope weighs.
 *
 * @example
 * ```ts
 * const { keys } = await measureScopeCost({ tenantId: 't1', history: ['...'] })
 * for (const k of keys satisfies readonly ScopeKeyCost[]) console.log(`${k.key}: ${k.bytes} B (${(k.share * 100).toFixed(0)}%)`)
 * ```
 */
export interface ScopeKeyCost {
  readonly key: string;
  /** v8-serialized size of the key's value (sealed, as carried). */
  readonly bytes: number;
  /** `bytes` over the whole scope's size (0..1). */
  readonly share: number;
}

/**
 * What {@link measureScopeCost} found.
 *
 * @example
 * ```ts
 * const cost: ScopeCost = await measureScopeCost({ tenantId: 't1', profile: { name: 'Ada' } })
 * if (cost.overBudget) console.warn(`scope is ${cost.bytes} B, over ${cost.budgetBytes} B: heaviest key ${cost.keys[0]?.key}`)
 * console.log(`${cost.perHopUs.median} µs per hop; a structuredClone takes ${cost.cloneUs} µs`)
 * ```
 */
export interface ScopeCost {
  /** v8-serialized size of the scope, sealed (deep-frozen) as a spawn carries it: what every hop copies. */
  readonly bytes: number;
  readonly budgetBytes: number;
  /** True when a supervisor with this budget would refuse the scope. */
  readonly overBudget: boolean;
  readonly hops: number;
  /** Wall time of a run divided by its hops (the same scope object every run, as within one request). */
  readonly perHopUs: ScopeCostQuantiles;
  /**
   * Wall time of a whole run whose scope object is new (see
   * `newScopeSamples`); `undefined` when none were asked for. The extra over
   * `perHopUs.median × hops` is paid once per new scope object, not per hop.
   */
  readonly newScopeRunUs: ScopeCostQuantiles | undefined;
  /** Time the supervisor thread was busy (not idle in its event loop) per hop. */
  readonly mainThreadPerHopUs: ScopeCostQuantiles;
  /** `structuredClone` of the same scope on this thread (median µs): the floor of a copying hop. */
  readonly cloneUs: number;
  /** Top-level keys of a plain-object scope, heaviest first (empty for other scopes). */
  readonly keys: readonly ScopeKeyCost[];
  /** Raw wall time of each timed run (the whole chain), µs, in order. */
  readonly runsUs: readonly number[];
  /** Raw supervisor-thread busy time of each timed run, µs, in order. */
  readonly mainThreadUs: readonly number[];
  /** Raw wall time of each run with a new scope object, µs, in order. */
  readonly newScopeRunsUs: readonly number[];
}

const Options = z
  .object({
    hops: z.number().int().min(1).max(MAX_MEASURED_HOPS).optional(),
    samples: z.number().int().min(1).max(1_000_000).optional(),
    warmup: z.number().int().min(0).max(1_000_000).optional(),
    newScopeSamples: z.number().int().min(0).max(100_000).optional(),
    budgetBytes: z.number().int().positive().optional(),
    supervisor: z.instanceof(Supervisor).optional(),
    signal: z.instanceof(AbortSignal).optional(),
  })
  .strict();

// A model that relays: a link's first turn delegates to the next link, its
// second answers with the child's answer; the last link answers at once. No
// tools of its own: what is measured is the hop, not a tool.
function relayModel(next: string | undefined): Model {
  return {
    name: 'scope-cost-relay',
    async generate({ messages }) {
      const last = messages[messages.length - 1];
      if (next !== undefined && last?.role === 'user') {
        return {
          message: {
            role: 'assistant',
            content: '',
            toolCalls: [{ id: 'hop', name: 'task', arguments: { subagent: next, instructions: 'relay' } }],
          },
        };
      }
      return { message: { role: 'assistant', content: last?.role === 'tool' ? String(last.content) : 'arrived' } };
    },
  };
}

function link(n: number, next: Agent | undefined): Agent {
  return defineAgent({
    name: `scope-cost-hop-${n}`,
    description: 'a link of the scope-cost chain',
    module: import.meta.url,
    instructions: '',
    model: relayModel(next?.name),
    ...(next === undefined ? {} : { subagents: [next] }),
  });
}

// The chain's links are exported one by one because a worker finds an agent
// among its module's exports by name. Not part of the package's public surface.
/** @internal */
export const scopeCostHop8 = link(8, undefined);
/** @internal */
export const scopeCostHop7 = link(7, scopeCostHop8);
/** @internal */
export const scopeCostHop6 = link(6, scopeCostHop7);
/** @internal */
export const scopeCostHop5 = link(5, scopeCostHop6);
/** @internal */
export const scopeCostHop4 = link(4, scopeCostHop5);
/** @internal */
export const scopeCostHop3 = link(3, scopeCostHop4);
/** @internal */
export const scopeCostHop2 = link(2, scopeCostHop3);
/** @internal */
export const scopeCostHop1 = link(1, scopeCostHop2);

const CHAIN: readonly Agent[] = [
  scopeCostHop1,
  scopeCostHop2,
  scopeCostHop3,
  scopeCostHop4,
  scopeCostHop5,
  scopeCostHop6,
  scopeCostHop7,
  scopeCostHop8,
];

function quantiles(values: readonly number[]): ScopeCostQuantiles {
  return { median: quantile(values, 0.5), p95: quantile(values, 0.95) };
}

function keyCosts(scope: unknown, total: number): ScopeKeyCost[] {
  if (typeof scope !== 'object' || scope === null || Object.getPrototypeOf(scope) !== Object.prototype) return [];
  return Object.entries(scope)
    .map(([key, value]) => {
      const bytes = serialize(value).byteLength;
      return { key, bytes, share: bytes / total };
    })
    .sort((a, b) => b.bytes - a.bytes);
}

// A deep copy that keeps arrays packed. structuredClone's arrays come back
// holey, and V8 serializes holey arrays sparse (~1% larger for array-heavy
// graphs), so a clone would carry more bytes than the caller's own object.
function carryCopy(value: unknown, seen = new Map<object, unknown>()): unknown {
  if (typeof value !== 'object' || value === null) return value;
  const known = seen.get(value);
  if (known !== undefined) return known;
  if (Array.isArray(value)) {
    const out: unknown[] = [];
    seen.set(value, out);
    const keys = irregularKeys(value);
    if (keys === undefined) {
      for (const item of value) out.push(carryCopy(item, seen));
    } else {
      // Holes or named properties: copied key by key (a sparse array stays sparse,
      // and one of length 2 ** 31 is not walked index by index).
      out.length = value.length;
      for (const key of keys)
        (out as unknown as Record<string, unknown>)[key] = carryCopy(
          (value as unknown as Record<string, unknown>)[key],
          seen,
        );
    }
    return out;
  }
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) {
    const copy = structuredClone(value);
    seen.set(value, copy);
    return copy;
  }
  const out: Record<string, unknown> = proto === null ? Object.create(null) : {};
  seen.set(value, out);
  for (const key of Object.keys(value)) {
    // defineProperty, not assignment: a JSON scope may have an own "__proto__" key.
    Object.defineProperty(out, key, {
      value: carryCopy((value as Record<string, unknown>)[key], seen),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return out;
}

// True when every object reachable from `value` is frozen (a sealed scope):
// the supervisor's own deep-freeze of it then changes nothing the caller sees.
function isDeepFrozen(value: unknown): boolean {
  const seen = new Set<object>();
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v !== 'object' || v === null || seen.has(v)) continue;
    // Typed arrays, Maps and Sets stay mutable even when frozen.
    if (!Object.isFrozen(v) || ArrayBuffer.isView(v) || v instanceof Map || v instanceof Set) return false;
    seen.add(v);
    for (const key of Object.keys(v)) stack.push((v as Record<string, unknown>)[key]);
  }
  return true;
}

function cloneMedianUs(scope: unknown, bytes: number): number {
  // About 3 MB of cloning (15-50 ms), and never fewer than 3 clones.
  const reps = Math.max(3, Math.min(1000, Math.floor(3_000_000 / Math.max(bytes, 1))));
  structuredClone(scope);
  const samples: number[] = [];
  for (let i = 0; i < reps; i++) {
    const start = performance.now();
    structuredClone(scope);
    samples.push((performance.now() - start) * 1000);
  }
  return quantile(samples, 0.5);
}

/**
 * Measure what a scope costs to carry across threads: its serialized size
 * against the budget, which top-level keys weigh most, and the time of real
 * subagent spawns carrying it — `hops` subagents, each delegating to the next
 * with its `task` tool through the supervisor, the product's own path —
 * per hop, next to a `structuredClone` of the same scope.
 *
 * Use it to decide whether to pass a lean projection, once the cost is
 * measured rather than guessed; `pnpm bench scope --file scope.json`
 * prints the same figures for a scope saved as JSON.
 *
 * Gotchas: it starts real worker threads (a private pool of `hops` threads
 * unless `supervisor` is given) and takes about `(samples + warmup +
 * newScopeSamples) × hops` hops of time (a fresh pool is only warm after its
 * first few hundred runs: keep the default warmup unless you pass a warm
 * `supervisor`); the private pool is closed before the promise settles, also
 * on failure or abort. Your scope object is never frozen or changed: the
 * runs carry a sealed copy of it (a deep-frozen scope, such as one your
 * `ScopeDefinition` parsed, is carried as is), and sizes are those of the
 * sealed scope, which is what crosses. The times are wall-clock times on a
 * shared machine: compare them with `cloneUs` from the same call, not across
 * machines.
 *
 * @throws InvalidArgumentError `ERR_NOT_CLONEABLE` naming the path of the
 *   first value that cannot cross a thread; `ERR_INVALID_ARGUMENT` for bad
 *   options (or a supervisor with fewer threads than `hops`). Rejects with
 *   the signal's reason when aborted, and with a `TroupeError` if a run does
 *   not end `done`.
 *
 * @example
 * ```ts
 * import { measureScopeCost } from '@troupe/supervisor'
 *
 * const requestScope = { tenantId: 't1', userId: 'u1', roles: ['admin'] }
 * const cost = await measureScopeCost(requestScope, { hops: 2 })
 * console.log(`${cost.bytes} B (budget ${cost.budgetBytes}): ${cost.perHopUs.median.toFixed(0)} µs per hop`)
 * for (const k of cost.keys.slice(0, 3)) console.log(k.key, k.bytes)
 * ```
 */
export async function measureScopeCost(scope: unknown, options: MeasureScopeCostOptions = {}): Promise<ScopeCost> {
  const parsed = Options.safeParse(options ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new InvalidArgumentError(
      `measureScopeCost: option ${issue?.path.join('.') || ''} ${issue?.message ?? 'is invalid'} (hops 1..${MAX_MEASURED_HOPS}, samples ≥ 1, warmup ≥ 0, newScopeSamples ≥ 0, budgetBytes > 0)`,
      { cause: parsed.error },
    );
  }
  const o = parsed.data;
  const hops = o.hops ?? 1;
  const samples = o.samples ?? 30;
  const warmup = o.warmup ?? 200;
  const newScopeSamples = o.newScopeSamples ?? 10;
  const budgetBytes = o.budgetBytes ?? DEFAULT_SCOPE_BUDGET_BYTES;
  const signal = o.signal;
  signal?.throwIfAborted();
  assertCloneable(scope, 'scope');
  // The supervisor deep-freezes the scope it is given: carry a frozen copy, not
  // the caller's object, unless that is deep-frozen already (sealed). Sizes are
  // those of the frozen value, which is what crosses (V8 writes a frozen array
  // sparse, a little bigger than a packed one).
  const carried = isDeepFrozen(scope) ? scope : deepFreeze(carryCopy(scope));
  const bytes = serialize(carried).byteLength;
  if (o.supervisor !== undefined && o.supervisor.pool.stats().threads < hops) {
    throw new InvalidArgumentError(
      `measureScopeCost: the supervisor's pool has ${o.supervisor.pool.stats().threads} threads, fewer than hops (${hops}): each link of the chain holds a thread while its child runs; give it at least ${hops} threads or omit supervisor`,
    );
  }
  const supervisor =
    o.supervisor ??
    createSupervisor({
      pool: { threads: hops },
      persistence: null,
      scopeBudgetBytes: Math.max(bytes, DEFAULT_SCOPE_BUDGET_BYTES),
    });
  const entry = CHAIN[CHAIN.length - hops] as Agent;
  try {
    await supervisor.pool.ready();
    const runOnce = async (runScope: unknown = carried): Promise<void> => {
      signal?.throwIfAborted();
      const outcome = await supervisor.spawn(entry, {
        input: 'measure',
        scope: runScope,
        ...(signal === undefined ? {} : { signal }),
      });
      if (outcome.status !== 'done') {
        signal?.throwIfAborted();
        throw new TroupeError(
          `measureScopeCost: a measured run ended ${outcome.status}${outcome.status === 'failed' || outcome.status === 'crashed' ? `: ${outcome.error.message}` : ''}`,
          {
            code: 'ERR_INTERNAL',
            ...(outcome.status === 'failed' || outcome.status === 'crashed' ? { cause: outcome.error } : {}),
          },
        );
      }
    };
    for (let i = 0; i < warmup; i++) await runOnce();
    const runsUs: number[] = [];
    const mainThreadUs: number[] = [];
    for (let i = 0; i < samples; i++) {
      const elu = performance.eventLoopUtilization();
      const start = performance.now();
      await runOnce();
      const wall = (performance.now() - start) * 1000;
      runsUs.push(wall);
      mainThreadUs.push(performance.eventLoopUtilization(elu).active * 1000);
    }
    const newScopeRunsUs: number[] = [];
    for (let i = 0; i < newScopeSamples; i++) {
      // Copied outside the timed part: the copy stands for the new request's own object.
      const fresh = carryCopy(scope);
      const start = performance.now();
      await runOnce(fresh);
      newScopeRunsUs.push((performance.now() - start) * 1000);
    }
    // The clone baseline and the key sizes come after the timed runs: their
    // garbage (about 3 MB of clones) would otherwise be collected during them.
    const cloneUs = cloneMedianUs(carried, bytes);
    const keys = keyCosts(carried, bytes);
    return {
      bytes,
      budgetBytes,
      overBudget: bytes > budgetBytes,
      hops,
      perHopUs: quantiles(runsUs.map((us) => us / hops)),
      newScopeRunUs: newScopeRunsUs.length === 0 ? undefined : quantiles(newScopeRunsUs),
      mainThreadPerHopUs: quantiles(mainThreadUs.map((us) => us / hops)),
      cloneUs,
      keys,
      runsUs,
      mainThreadUs,
      newScopeRunsUs,
    };
  } finally {
    if (o.supervisor === undefined) await supervisor.close();
  }
}
