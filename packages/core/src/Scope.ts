import { serialize } from 'node:v8';
import type { z } from 'zod';
import { assertCloneable, cloneableSizeBound, irregularKeys } from './assertCloneable.js';
import { describeValue } from './internal/describeValue.js';
import { formatBytes } from './internal/formatBytes.js';
import { InvalidArgumentError } from './TroupeError.js';

/**
 * Default scope budget: 4 KiB of serialized (structured-clone) bytes.
 *
 * Raise it with `defineScope(schema, { budgetBytes })` or
 * `createSupervisor({ scopeBudgetBytes })`; a lean scope (ids, a role) is
 * far below it.
 *
 * @example
 * ```ts
 * const Roomy = defineScope(z.object({ tenantId: z.string() }), { budgetBytes: 2 * DEFAULT_SCOPE_BUDGET_BYTES })
 * ```
 */
export const DEFAULT_SCOPE_BUDGET_BYTES = 4096;

/**
 * A value made read-only all the way down.
 *
 * What a scope's tools see: assigning to any part of it does not compile
 * (and throws at run time, the value being frozen).
 *
 * @example
 * ```ts
 * const user: DeepReadonly<{ roles: string[] }> = deepFreeze({ roles: ['admin'] })
 * user.roles.includes('admin') // reading is fine; user.roles.push(...) does not compile
 * ```
 */
export type DeepReadonly<T> = T extends (infer E)[]
  ? readonly DeepReadonly<E>[]
  : T extends Map<infer K, infer V>
    ? ReadonlyMap<DeepReadonly<K>, DeepReadonly<V>>
    : T extends Set<infer E>
      ? ReadonlySet<DeepReadonly<E>>
      : T extends object
        ? { readonly [K in keyof T]: DeepReadonly<T[K]> }
        : T;

/**
 * A parsed scope: validated, deep-frozen, cloneable and within budget.
 * Produced only by {@link ScopeDefinition.parse}.
 *
 * @example
 * ```ts
 * const TenantScope = defineScope(z.object({ tenantId: z.string() }))
 * const scope: Scope<{ tenantId: string }> = TenantScope.parse({ tenantId: 't1' })
 * ```
 */
export type Scope<T = unknown> = DeepReadonly<T>;

/**
 * Options of {@link defineScope}.
 *
 * @example
 * ```ts
 * const options: ScopeOptions = { budgetBytes: 1024 }
 * const Lean = defineScope(z.object({ userId: z.string() }), options)
 * ```
 */
export interface ScopeOptions {
  /** Serialized-size budget in bytes; a scope over it is refused. Default 4096. */
  readonly budgetBytes?: number;
}

/**
 * What {@link defineScope} returns: the integrator's schema plus Troupe's
 * checks. `T` is the scope the schema produces (what tools read as
 * `ctx.scope`), `I` what it accepts (what `startAgent` and `spawn` take).
 *
 * Pass it as `createSupervisor({ scope })`: every scope given to `startAgent`
 * and `spawn` is then parsed by it.
 *
 * @example
 * ```ts
 * const TenantScope: ScopeDefinition<{ tenantId: string }> = defineScope(z.object({ tenantId: z.string() }))
 * const scope = TenantScope.parse({ tenantId: 't1' }) // throws ERR_INVALID_ARGUMENT for { tenantId: 1 }
 * ```
 */
export interface ScopeDefinition<T, I = T> {
  readonly schema: z.ZodType<T, I>;
  readonly budgetBytes: number;
  /**
   * Validate `input` with the schema, check it is structured-cloneable, measure
   * its serialized size against the budget and deep-freeze it.
   * @throws InvalidArgumentError `ERR_INVALID_ARGUMENT` (schema),
   *   `ERR_NOT_CLONEABLE` (names the path), `ERR_SCOPE_OVER_BUDGET` (gives the size).
   */
  parse(input: unknown): Scope<T>;
}

/**
 * The scope a {@link ScopeDefinition} produces, to declare what tools read:
 * `ToolContext<ScopeOf<typeof TenantScope>>`.
 *
 * @example
 * ```ts
 * const TenantScope = defineScope(z.object({ tenantId: z.string() }))
 * type TenantScope = ScopeOf<typeof TenantScope> // { tenantId: string }
 * ```
 */
// biome-ignore lint/suspicious/noExplicitAny: any input type; only the output is read.
export type ScopeOf<D extends ScopeDefinition<unknown, any>> = D extends ScopeDefinition<infer T, any> ? T : never;

// A sealed scope is deep-frozen, so its size cannot change: measure it once.
// Only values this module froze all the way down are cached: a value frozen
// at the top only can still change inside, and a stale size would let an
// over-budget scope through.
const measured = new WeakMap<object, number>();

// Values `deepFreeze` / `sealScope` froze together with everything they reach.
// Lets a second `deepFreeze` of the same value (or of a value holding it) stop
// in one lookup instead of walking the whole graph again. Only the roots are
// recorded: a WeakSet insertion per object cost more than the freeze itself
// (6 ms for the 10,600 objects of a 1 MiB user graph).
const deeplyFrozen = new WeakSet<object>();

/**
 * True when `value` can never change: {@link deepFreeze} or {@link sealScope}
 * froze it all the way down and it holds nothing but plain objects, arrays
 * and primitives (a `Map`, `Set`, `Date`, `RegExp`, buffer or typed array
 * stays changeable when frozen). A primitive is constant too. What is derived from such a value (its size, its bytes, a frozen copy
 * in another thread) may be kept for as long as the value lives.
 *
 * @example
 * ```ts
 * isDeepFrozen(deepFreeze({ a: [1, 2] }))      // true
 * isDeepFrozen(Object.freeze({ a: [1, 2] }))   // false: the array is not frozen
 * isDeepFrozen(deepFreeze({ at: new Date() })) // false: a Date can still change
 * ```
 */
export function isDeepFrozen(value: unknown): boolean {
  return typeof value !== 'object' || value === null || deeplyFrozen.has(value);
}

/**
 * Structured-clone size of `value` in bytes (what a thread hop copies).
 * The size of a value sealed by {@link deepFreeze} / {@link sealScope} is
 * measured once and remembered.
 *
 * @example
 * ```ts
 * serializedSize({ tenantId: 't1' }) // a few dozen bytes
 * ```
 */
export function serializedSize(value: unknown): number {
  if (typeof value === 'object' && value !== null) {
    const known = measured.get(value);
    if (known !== undefined) return known;
    const bytes = serialize(value);
    if (deeplyFrozen.has(value)) {
      measured.set(value, bytes.byteLength);
      // Heavy sealed values are about to cross as bytes: keep what was just made.
      if (bytes.byteLength >= KEEP_BYTES_FROM) kept.set(value, bytes);
    }
    return bytes.byteLength;
  }
  return serialize(value).byteLength;
}

// Upper bounds of the serialized size of sealed values never serialized
// (see sealScope): enough to pass a budget or pick the transport.
const bounds = new WeakMap<object, number>();

/**
 * An upper bound of {@link serializedSize}: the exact size when it was
 * measured, the bound `sealScope` computed when it did not need to serialize
 * the value, else the exact size (measured now). For decisions that only
 * need "at most so many bytes" — a budget, the transport of a lean scope.
 */
export function serializedSizeAtMost(value: unknown): number {
  if (typeof value === 'object' && value !== null) {
    const known = measured.get(value) ?? bounds.get(value);
    if (known !== undefined) return known;
  }
  return serializedSize(value);
}

// Serialized bytes of heavy sealed values, kept from their measurement.
const KEEP_BYTES_FROM = 8 * 1024;
const kept = new WeakMap<object, Uint8Array>();

/**
 * The v8-serialized bytes of `value` (what structured clone would write).
 * For a sealed value from 8 KiB up, the bytes made when it was measured are
 * returned (and forgotten): a heavy scope is serialized once, not twice.
 */
export function serializedBytes(value: unknown): Uint8Array {
  if (typeof value === 'object' && value !== null) {
    const bytes = kept.get(value);
    if (bytes !== undefined) {
      kept.delete(value);
      return bytes;
    }
  }
  return serialize(value);
}

/**
 * Freeze `value` and everything reachable from it (through object keys, array
 * items, Map keys and values, Set items); returns the same value.
 *
 * Gotchas: a value frozen only at the top is still walked (its insides may be
 * mutable); typed arrays and `ArrayBuffer` bytes cannot be frozen, and a
 * frozen `Map`/`Set`/`Date`/`RegExp` can still be changed (`set`, `add`,
 * `setTime`, `compile`), so a value holding anything but plain objects,
 * arrays and primitives is frozen as far as possible but never counts as
 * sealed (see {@link isDeepFrozen}: nothing derived from it is kept). For a copy this thread has
 * just received, {@link freezeReceived} is cheaper.
 *
 * @example
 * ```ts
 * const settings = deepFreeze({ limits: { daily: 10 }, tags: ['a'] })
 * Object.isFrozen(settings.limits) // true
 * isDeepFrozen(settings)           // true
 * ```
 */
export function deepFreeze<T>(value: T): DeepReadonly<T> {
  if (typeof value !== 'object' || value === null || deeplyFrozen.has(value)) return value as DeepReadonly<T>;
  // Fast path for the common lean value (a scope of ids, a small metadata
  // record): a plain object of primitives needs no walk and no visited set.
  if (Object.getPrototypeOf(value) === Object.prototype && isFlat(value as Record<string, unknown>)) {
    Object.freeze(value);
    deeplyFrozen.add(value);
    return value as DeepReadonly<T>;
  }
  const seen = new Set<object>();
  const stack: object[] = [value];
  let sealable = true;
  while (stack.length > 0) {
    const v = stack.pop() as object;
    if (seen.has(v) || deeplyFrozen.has(v)) continue;
    seen.add(v);
    if (ArrayBuffer.isView(v) || v instanceof ArrayBuffer) {
      // Their bytes cannot be frozen (freezing a view with elements throws).
      sealable = false;
      continue;
    }
    Object.freeze(v);
    if (!freezeSeals(v)) sealable = false;
    pushChildren(v, stack);
  }
  if (sealable) deeplyFrozen.add(value);
  return value as DeepReadonly<T>;
}

/**
 * Deep-freeze a value this thread has just received (deserialized or
 * structured-cloned) and nobody else holds: no object in it is frozen yet,
 * so "already frozen" marks an object this walk has visited and no visited
 * set is needed (cycles and shared objects included). Never use it on other
 * values: an object frozen at the top only would keep its insides mutable.
 */
export function freezeReceived<T>(value: T): DeepReadonly<T> {
  if (typeof value !== 'object' || value === null) return value as DeepReadonly<T>;
  // The common lean value (a scope of ids, a small metadata record): one freeze, no walk.
  if (Object.getPrototypeOf(value) === Object.prototype && isFlat(value as Record<string, unknown>)) {
    Object.freeze(value);
    return value as DeepReadonly<T>;
  }
  const stack: object[] = [value];
  while (stack.length > 0) {
    const v = stack.pop() as object;
    if (Object.isFrozen(v) || ArrayBuffer.isView(v) || v instanceof ArrayBuffer) continue;
    Object.freeze(v);
    pushChildren(v, stack);
  }
  return value as DeepReadonly<T>;
}

// Push the objects `v` holds — array items, Map keys and values, Set items,
// property values — for a freezing walk. An array with holes or named
// properties (they cross too) is read by key, so a sparse array of length
// 2 ** 31 is not walked index by index.
function pushChildren(v: object, stack: object[]): void {
  if (Array.isArray(v)) {
    const keys = irregularKeys(v);
    if (keys === undefined) {
      for (let i = 0; i < v.length; i++) {
        const item: unknown = v[i];
        if (typeof item === 'object' && item !== null) stack.push(item);
      }
      return;
    }
    for (const key of keys) {
      const item = (v as unknown as Record<string, unknown>)[key];
      if (typeof item === 'object' && item !== null) stack.push(item);
    }
  } else if (v instanceof Map) {
    for (const [k, item] of v) {
      if (typeof k === 'object' && k !== null) stack.push(k);
      if (typeof item === 'object' && item !== null) stack.push(item);
    }
  } else if (v instanceof Set) {
    for (const item of v) if (typeof item === 'object' && item !== null) stack.push(item);
  } else {
    for (const key of Object.keys(v)) {
      const item = (v as Record<string, unknown>)[key];
      if (typeof item === 'object' && item !== null) stack.push(item);
    }
  }
}

function isFlat(value: Record<string, unknown>): boolean {
  for (const key in value) {
    const item = value[key];
    if (typeof item === 'object' && item !== null) return false;
  }
  return true;
}

/** Where the budget of a scope sealed without a schema is set (`sealScope`'s default). */
const SUPERVISOR_BUDGET_OPTION = 'createSupervisor({ scopeBudgetBytes })';
/** Where the budget of a scope defined with a schema is set: the supervisor's option does not apply to it. */
const DEFINITION_BUDGET_OPTION = 'defineScope(schema, { budgetBytes })';

/**
 * Throw `ERR_SCOPE_OVER_BUDGET` when `bytes` exceeds `budgetBytes`. The
 * message gives the size, says to pass a lean projection, and names `option`,
 * where this budget is raised (default `createSupervisor({ scopeBudgetBytes })`).
 *
 * For a check of your own before a scope reaches the supervisor; the
 * supervisor and {@link defineScope} already apply it.
 *
 * @example
 * ```ts
 * const scope = { tenantId: 't1', userId: 'u1' }
 * assertScopeBudget(serializedSize(scope), DEFAULT_SCOPE_BUDGET_BYTES) // passes: a few dozen bytes
 * ```
 */
export function assertScopeBudget(
  bytes: number,
  budgetBytes: number,
  what = 'scope',
  option = SUPERVISOR_BUDGET_OPTION,
): void {
  if (bytes > budgetBytes) {
    throw new InvalidArgumentError(
      `${what} is ${formatBytes(bytes)}${bytes < 1024 ? '' : ` (${bytes} bytes)`}, over the ${formatBytes(budgetBytes)} budget: it is copied on every thread hop, so pass a lean projection (ids and role, not the preloaded user graph) or raise the budget with ${option}`,
      { code: 'ERR_SCOPE_OVER_BUDGET' },
    );
  }
}

/**
 * Validate a byte budget option: a positive safe integer.
 *
 * Throws an `InvalidArgumentError` naming `name` for anything else.
 *
 * @example
 * ```ts
 * const budget = checkBudget(8192)       // 8192
 * checkBudget(0, 'scopeBudgetBytes')     // throws: scopeBudgetBytes must be a positive integer ...
 * ```
 */
export function checkBudget(budgetBytes: unknown, name = 'budgetBytes'): number {
  if (typeof budgetBytes !== 'number' || !Number.isSafeInteger(budgetBytes) || budgetBytes <= 0) {
    throw new InvalidArgumentError(
      `${name} must be a positive integer number of bytes, got ${describeValue(budgetBytes)}`,
    );
  }
  return budgetBytes;
}

/**
 * Check an already-validated value as a scope: cloneable, within budget,
 * deep-frozen. Returns it (the same object) frozen, with its size or an upper
 * bound of it remembered.
 *
 * Gotchas: the value is frozen in place. A value refused as not cloneable is
 * left untouched; one refused as over the budget has been frozen (its size is
 * that of the frozen value, which is what crosses). A scope is plain data:
 * an accessor property is read when the scope is sealed and when it first
 * crosses to a worker, which keeps that copy for later runs of the same scope
 * object — what the getter returns afterwards is not seen (one that answers
 * differently while the scope is sealed is refused).
 *
 * `budgetOption` names, in the over-budget error, where the budget is set
 * (default `createSupervisor({ scopeBudgetBytes })`, the budget of scopes
 * given without a schema).
 *
 * @throws InvalidArgumentError `ERR_NOT_CLONEABLE` (naming the path when
 *   there is one), `ERR_SCOPE_OVER_BUDGET` (giving the size).
 *
 * What the supervisor does with a scope given without a schema; with a
 * {@link defineScope} definition, `parse` does it after validation.
 *
 * @example
 * ```ts
 * const scope = sealScope({ tenantId: 't1', roles: ['admin'] })
 * Object.isFrozen(scope.roles) // true
 * sealScope({ user: { save() {} } }) // throws ERR_NOT_CLONEABLE naming scope.user.save
 * ```
 */
export function sealScope<T>(
  value: T,
  budgetBytes = DEFAULT_SCOPE_BUDGET_BYTES,
  budgetOption = SUPERVISOR_BUDGET_OPTION,
): Scope<T> {
  // Sealed before (every spawn of a conversation passes the same scope): no
  // walk again, only the budget against the size known then — unless it holds
  // a Map, a Set or another value freezing cannot stop from changing: that one
  // is serialized again (as it always was: its size is never kept), and a
  // value put into it since that cannot cross is refused with its path.
  if (typeof value === 'object' && value !== null && sealed.has(value)) {
    if (!deeplyFrozen.has(value)) assertScopeBudget(sizeOfSealed(value), budgetBytes, 'scope', budgetOption);
    else if (serializedSizeAtMost(value) > budgetBytes)
      assertScopeBudget(serializedSize(value), budgetBytes, 'scope', budgetOption);
    return value as Scope<T>;
  }
  if (typeof value !== 'object' || value === null) {
    assertCloneable(value, 'scope');
    assertScopeBudget(serializedSize(value), budgetBytes, 'scope', budgetOption);
    return value as Scope<T>;
  }
  // One walk checks every value, lists every object and bounds the size; the
  // objects are frozen only once the whole scope passed cloneability, so a
  // scope refused as not cloneable is left as it was. (One over the budget is
  // refused after freezing: its size is that of the frozen value, which is
  // what crosses.)
  const objects: object[] = [];
  const bound = cloneableSizeBound(value, objects);
  if (bound < 0) {
    assertCloneable(value, 'scope');
    // The second walk found nothing wrong: a getter answered differently the
    // second time. Such a scope cannot be sealed (freezing does not stop a getter).
    throw notPlainData('it changed while it was read (a getter returns a different value on every read)');
  }
  freezeListed(value, objects);
  if (bound <= budgetBytes) {
    // Within budget even at its largest: no serialization on the way in (a
    // lean scope per request is the daemon's common case).
    bounds.set(value, bound);
  } else {
    // Frozen first, then measured: V8 serializes a frozen array differently
    // (as sparse, 2 B more per element), and the size must be that of what crosses.
    let bytes: number;
    try {
      bytes = serializedSize(value);
    } catch (error) {
      // The walk accepts what it can see; serialization is the last word.
      throw notPlainData(`it cannot be cloned (${errorText(error)})`, error);
    }
    assertScopeBudget(bytes, budgetBytes, 'scope', budgetOption);
  }
  sealed.add(value);
  return value as Scope<T>;
}

// The size of a scope sealed before. One that holds a Map or Set (or a Date, a RegExp) was frozen
// as far as freezing goes, but those can still change: `set` may have put a function into it since,
// so it is serialized again every time, and what refuses it is the path of what changed, as at the
// first seal — not the serializer's DataCloneError.
function sizeOfSealed(value: object): number {
  try {
    return serializedSize(value);
  } catch (error) {
    assertCloneable(value, 'scope');
    throw notPlainData(`it cannot be cloned (${errorText(error)})`, error);
  }
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : describeValue(error);
}

function notPlainData(why: string, cause?: unknown): InvalidArgumentError {
  return new InvalidArgumentError(
    `scope is not plain data: ${why}; pass plain data (objects, arrays, primitives, Date, Map, Set, typed arrays)`,
    cause === undefined ? { code: 'ERR_NOT_CLONEABLE' } : { code: 'ERR_NOT_CLONEABLE', cause },
  );
}

// Scopes that passed sealScope: checked cloneable, deep-frozen, measured.
const sealed = new WeakSet<object>();

// Freeze every object `isCloneable` listed for `root` (all it reaches), as
// `deepFreeze` would, without walking the graph a second time.
function freezeListed(root: object, objects: readonly object[]): void {
  let sealable = true;
  for (const o of objects) {
    if (ArrayBuffer.isView(o) || o instanceof ArrayBuffer) {
      // Their bytes cannot be frozen (freezing a view with elements throws).
      sealable = false;
      continue;
    }
    Object.freeze(o);
    if (sealable && !freezeSeals(o)) sealable = false;
  }
  if (sealable) deeplyFrozen.add(root);
}

// Whether Object.freeze makes `o` unchangeable: a plain object or an array.
// Anything else that crosses a thread can still change — or read differently —
// once frozen: a Map or Set (set/add), a Date (setTime), a RegExp (compile),
// a SharedArrayBuffer (shared bytes), a boxed primitive. A value holding one
// is frozen as far as it goes but never counts as sealed.
function freezeSeals(o: object): boolean {
  if (Array.isArray(o)) return true;
  const proto: unknown = Object.getPrototypeOf(o);
  return proto === Object.prototype || proto === null;
}

/**
 * Define the scope (who an agent acts for) with your zod schema. The scope is
 * parsed at the edge, deep-frozen, checked structured-cloneable and measured
 * against a budget, because it is copied on every thread hop.
 *
 * Keep it lean: ids and role, not a preloaded ORM graph. Scope is never
 * persisted; callers re-supply it on restore.
 *
 * @example
 * ```ts
 * const AgentScope = defineScope(z.object({ userId: z.string(), orgId: z.string(), role: z.enum(['admin', 'member']) }))
 * const scope = AgentScope.parse({ userId: 'u1', orgId: 'o1', role: 'admin' })
 * ```
 */
export function defineScope<T, I = T>(schema: z.ZodType<T, I>, options: ScopeOptions = {}): ScopeDefinition<T, I> {
  const budgetBytes = checkBudget(options.budgetBytes ?? DEFAULT_SCOPE_BUDGET_BYTES);
  return Object.freeze({
    schema,
    budgetBytes,
    parse(input: unknown): Scope<T> {
      let result: ReturnType<typeof schema.safeParse>;
      try {
        result = schema.safeParse(input);
      } catch (error) {
        // safeParse reports what the schema refuses; what it throws came from reading the input
        // (a revoked Proxy, a getter that throws) or from the caller's own refinement.
        throw new InvalidArgumentError(
          `scope: the schema threw while reading it (${errorText(error)}): pass plain data (a revoked Proxy or a throwing getter cannot be read)`,
          { cause: error },
        );
      }
      if (!result.success) {
        const issue = result.error.issues[0];
        const where = issue === undefined || issue.path.length === 0 ? 'scope' : `scope.${issue.path.join('.')}`;
        throw new InvalidArgumentError(`${where}: ${issue?.message ?? 'invalid'}; fix the scope passed to the agent`, {
          cause: result.error,
        });
      }
      return sealScope(result.data, budgetBytes, DEFINITION_BUDGET_OPTION);
    },
  });
}
