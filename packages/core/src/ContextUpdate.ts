import { assertCloneable } from './assertCloneable.js';
import type { AgentId } from './Id.js';
import { describeValue } from './internal/describeValue.js';
import { deepFreeze } from './Scope.js';
import { InvalidArgumentError, TroupeError } from './TroupeError.js';

/**
 * An agent's mutable, persisted metadata: a frozen string-keyed record.
 *
 * Change it only through a {@link ContextUpdate}; the object itself is frozen.
 *
 * @example
 * ```ts
 * const metadata: Metadata = { notes: ['call back'], stage: 'draft' }
 * ```
 */
export type Metadata = Readonly<Record<string, unknown>>;

/**
 * One operation of a {@link ContextUpdate}, in the order it was added.
 *
 * What {@link ContextUpdate.from} accepts and `update.operations` lists.
 *
 * @example
 * ```ts
 * const ops: Operation[] = [
 *   { op: 'set', key: 'stage', value: 'draft' },
 *   { op: 'append', key: 'notes', value: 'call back' },
 * ]
 * const update = ContextUpdate.from(ops)
 * ```
 */
export type Operation =
  | { readonly op: 'set'; readonly key: string; readonly value: unknown }
  | { readonly op: 'merge'; readonly key: string; readonly value: Readonly<Record<string, unknown>> }
  | { readonly op: 'append'; readonly key: string; readonly value: unknown }
  | { readonly op: 'delete'; readonly key: string }
  | { readonly op: 'logEvent'; readonly type: string; readonly data: Readonly<Record<string, unknown>> };

/**
 * A bookkeeping event in an agent's session log. It never enters the model's transcript.
 *
 * Written with `ContextUpdate.logEvent(type, data)`; read from a snapshot's `events`.
 *
 * @example
 * ```ts
 * declare const events: readonly SessionEvent[]
 * const notes = events.filter((e) => e.type === 'note_added').map((e) => e.data)
 * ```
 */
export interface SessionEvent {
  readonly type: string;
  readonly data: Readonly<Record<string, unknown>>;
  /** The agent whose update recorded it (a subagent's events keep its own id). */
  readonly agentId: AgentId;
  /** When it was applied, in the `Clock` base. */
  readonly at: number;
}

/**
 * Event types that belong to the transcript; `logEvent` refuses them so it cannot smuggle content.
 *
 * @example
 * ```ts
 * TRANSCRIPT_EVENT_TYPES.has('tool_result') // true: ContextUpdate.logEvent('tool_result', ...) throws
 * ```
 */
export const TRANSCRIPT_EVENT_TYPES: ReadonlySet<string> = new Set([
  'user_message',
  'assistant_message',
  'system_message',
  'tool_message',
  'tool_result',
]);

/**
 * Prefix of the library-owned metadata keys a tool may not set, merge or delete.
 *
 * @example
 * ```ts
 * const key = `${PROTECTED_KEY_PREFIX}usage` // 'troupe.usage', refused in a tool's update
 * ```
 */
export const PROTECTED_KEY_PREFIX = 'troupe.';

/**
 * True for a library-owned metadata key.
 *
 * @example
 * ```ts
 * isProtectedKey('troupe.usage') // true: tools cannot write it
 * isProtectedKey('notes')        // false
 * ```
 */
export function isProtectedKey(key: string): boolean {
  return key.startsWith(PROTECTED_KEY_PREFIX);
}

function updateError(
  message: string,
  code: 'ERR_CONTEXT_UPDATE' | 'ERR_PROTECTED_KEY' = 'ERR_CONTEXT_UPDATE',
): TroupeError {
  return new TroupeError(message, { code });
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

function checkKey(key: unknown, op: string, allowProtected: boolean): asserts key is string {
  if (typeof key !== 'string' || key.length === 0) {
    throw updateError(`${op}: the key must be a non-empty string, got ${describeValue(key)}`);
  }
  if (key === '__proto__') {
    // As a property name it would replace the metadata's prototype, not add a key.
    throw updateError(`${op}: "__proto__" cannot be a metadata key; use another key`);
  }
  if (!allowProtected && isProtectedKey(key)) {
    throw updateError(
      `${op} "${key}": keys starting with "${PROTECTED_KEY_PREFIX}" are owned by Troupe and cannot be changed by a tool; use another key`,
      'ERR_PROTECTED_KEY',
    );
  }
}

function checkEventType(type: unknown): asserts type is string {
  if (typeof type !== 'string' || type.length === 0) {
    throw updateError(`logEvent: the type must be a non-empty string, got ${describeValue(type)}`);
  }
  if (TRANSCRIPT_EVENT_TYPES.has(type)) {
    throw updateError(
      `logEvent "${type}": transcript types cannot be logged as bookkeeping events (they would enter the model's history); use another type`,
    );
  }
}

/**
 * Where a value JSON cannot carry exactly sits, what it is, and what to pass instead.
 *
 * @example
 * ```ts
 * const bad: NotJson | undefined = findNotJson({ count: 10n })
 * if (bad !== undefined) console.log(`${bad.path} is ${bad.what}: ${bad.instead}`)
 * ```
 */
export interface NotJson {
  readonly path: string;
  readonly what: string;
  readonly instead: string;
  /** Nested deeper than a copy or a save can follow (`ERR_NOT_CLONEABLE` where it is refused). */
  readonly tooDeep?: true;
}

/**
 * Options of {@link findNotJson}.
 *
 * @example
 * ```ts
 * const options: FindNotJsonOptions = { undefinedPropertiesAreAbsent: true }
 * findNotJson({ note: undefined }, 'record', options) // undefined: accepted
 * findNotJson({ note: undefined }, 'record')          // refused: it would come back as {}
 * ```
 */
export interface FindNotJsonOptions {
  /**
   * Treat an object property holding `undefined` as absent (JSON drops it),
   * for typed records whose optional fields may hold `undefined`. Default
   * false: refused, since `{ a: undefined }` would come back as `{}`.
   */
  readonly undefinedPropertiesAreAbsent?: boolean;
  /** How many levels above `value` it sits in what is checked piece by piece (counts toward the depth bound). */
  readonly depth?: number;
}

/** How deep {@link findNotJson} follows a value: deeper is refused (a typed error, not a stack overflow). */
const MAX_JSON_DEPTH = 1000;

function jsonSegment(key: string): string {
  return /^[A-Za-z_$][\w$]*$/.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`;
}

function notJsonObject(obj: object): { what: string; instead: string } {
  if (obj instanceof Date) return { what: 'a Date', instead: 'pass date.toISOString() or date.getTime()' };
  if (obj instanceof Map)
    return { what: 'a Map', instead: 'pass Object.fromEntries(map) or an array of [key, value] pairs' };
  if (obj instanceof Set) return { what: 'a Set', instead: 'pass an array ([...set])' };
  if (ArrayBuffer.isView(obj) || obj instanceof ArrayBuffer) {
    return {
      what: `a ${obj.constructor.name}`,
      instead: 'pass an array of numbers (Array.from(bytes)) or a base64 string',
    };
  }
  const name = (obj as { constructor?: { name?: unknown } }).constructor?.name;
  return {
    what: `an instance of ${typeof name === 'string' && name !== '' ? name : 'a class'}`,
    instead: 'pass a plain object of its fields',
  };
}

/**
 * Find the first value JSON cannot carry exactly — a round trip through
 * `JSON.stringify`/`JSON.parse` would drop, change or refuse it — or
 * `undefined` when the whole value survives: `undefined` (in an object or a
 * list, or at the top), `NaN`, `±Infinity`, `-0`, bigints, functions,
 * symbols (as values or keys), Dates, Maps, Sets, typed arrays, class
 * instances, arrays with holes or named properties, and cycles. Plain
 * objects (also without a prototype), arrays, strings, finite numbers,
 * booleans and null are fine; an object reached twice (not a cycle) is
 * fine too (it comes back as two equal copies).
 *
 * @example
 * ```ts
 * findNotJson({ when: new Date() }, 'metadata')
 * // { path: 'metadata.when', what: 'a Date', instead: 'pass date.toISOString() or date.getTime()' }
 * ```
 */
export function findNotJson(value: unknown, root = 'value', options: FindNotJsonOptions = {}): NotJson | undefined {
  const dropUndefined = options.undefinedPropertiesAreAbsent === true;
  const maxDepth = MAX_JSON_DEPTH - (options.depth ?? 0);
  // The objects on the way down (a cycle check) and the keys taken to reach each: the path is
  // written only for what is found (a state of 10 KB is walked on every save).
  const ancestors: object[] = [];
  const trail: (string | number)[] = [];
  const at = (extra?: string | number): string => {
    let path = root;
    for (const k of extra === undefined ? trail : [...trail, extra])
      path += typeof k === 'number' ? `[${k}]` : jsonSegment(k);
    return path;
  };
  const walk = (v: unknown): NotJson | undefined => {
    if (trail.length > maxDepth) {
      // Past any real data's depth, and past what a thread hop or the stack of a walk can take.
      let path = root;
      for (const k of trail.slice(0, 8)) path += typeof k === 'number' ? `[${k}]` : jsonSegment(k);
      return {
        path: `${path}…`,
        what: `nested more than ${MAX_JSON_DEPTH} levels deep`,
        instead: 'pass plain data nested less deeply',
        tooDeep: true,
      };
    }
    switch (typeof v) {
      case 'string':
      case 'boolean':
        return undefined;
      case 'number':
        if (!Number.isFinite(v)) {
          return {
            path: at(),
            what: String(v),
            instead: 'JSON writes it as null: pass a finite number, null or a string',
          };
        }
        if (Object.is(v, -0)) return { path: at(), what: '-0', instead: 'JSON writes it as 0: pass 0' };
        return undefined;
      case 'undefined':
        return { path: at(), what: 'undefined', instead: 'JSON drops it: pass null, or delete the key' };
      case 'bigint':
        return { path: at(), what: 'a bigint', instead: 'JSON cannot write it: pass a string (String(n)) or a number' };
      case 'function':
        return { path: at(), what: `a function${v.name ? ` (${v.name})` : ''}`, instead: 'pass plain data' };
      case 'symbol':
        return { path: at(), what: `a symbol (${String(v.description)})`, instead: 'pass a string' };
    }
    if (v === null) return undefined;
    const obj = v as object;
    if (ancestors.includes(obj))
      return { path: at(), what: 'a cycle', instead: 'pass a tree: JSON cannot write a value that contains itself' };
    const proto = Object.getPrototypeOf(obj);
    if (Array.isArray(obj)) {
      if (proto !== Array.prototype) return { path: at(), ...notJsonObject(obj) };
      const keys = Object.keys(obj);
      if (keys.length !== obj.length) {
        const named = keys.find((k) => String(Number(k)) !== k);
        return named === undefined
          ? { path: at(), what: 'a list with holes', instead: 'JSON writes holes as null: fill them (null) first' }
          : { path: at(named), what: 'a named property of a list', instead: 'JSON drops it: use an object' };
      }
      ancestors.push(obj);
      for (let i = 0; i < obj.length; i++) {
        trail.push(i);
        const bad = walk(obj[i]);
        if (bad !== undefined) return bad;
        trail.pop();
      }
      ancestors.pop();
      return undefined;
    }
    if (proto !== Object.prototype && proto !== null) return { path: at(), ...notJsonObject(obj) };
    const symbols = Object.getOwnPropertySymbols(obj);
    if (symbols.length > 0) {
      return {
        path: `${at()}[${String(symbols[0])}]`,
        what: 'a symbol-keyed property',
        instead: 'JSON drops it: use a string key',
      };
    }
    ancestors.push(obj);
    for (const key of Object.keys(obj)) {
      const item = (obj as Record<string, unknown>)[key];
      if (item === undefined && dropUndefined) continue;
      trail.push(key);
      const bad = walk(item);
      if (bad !== undefined) return bad;
      trail.pop();
    }
    ancestors.pop();
    return undefined;
  };
  return walk(value);
}

/**
 * Throw an `InvalidArgumentError` with code `ERR_NOT_JSON` naming the path of
 * the first value JSON cannot carry exactly ({@link findNotJson}) and what to
 * pass instead. Metadata is saved as JSON: refusing such a value when it is
 * given beats mangling it when it is saved.
 *
 * @example
 * ```ts
 * assertJson({ n: 10n }, 'set "count"')
 * // throws: set "count".n is a bigint: JSON cannot write it: pass a string (String(n)) or a number
 * ```
 */
export function assertJson(value: unknown, root = 'value', options: FindNotJsonOptions = {}): void {
  const bad = findNotJson(value, root, options);
  if (bad !== undefined) {
    throw new InvalidArgumentError(`${bad.path} is ${bad.what}: ${bad.instead}`, {
      code: bad.tooDeep ? 'ERR_NOT_CLONEABLE' : 'ERR_NOT_JSON',
    });
  }
}

/**
 * Structured changes a tool makes to its agent's `state.metadata`, plus
 * bookkeeping events for the session log. Return it with a tool's result
 * (`ToolResult.ok(value, update)`); the agent applies it when the call ends.
 *
 * Immutable: every method returns a new update. Values are checked to be
 * JSON that round-trips exactly (metadata is saved as JSON: a Date, a Map,
 * `undefined`, `NaN`, a bigint or a class instance is refused here with
 * `ERR_NOT_JSON`, naming the path and what to pass instead, rather than
 * mangled when saved), structured-cloneable, and deep-frozen when added, so
 * an update can cross a thread and nothing can change it afterwards. Protected keys
 * (`troupe.*`), the key `__proto__` and transcript event types are refused
 * here and again when the update is applied.
 *
 * Gotcha: deep-freezing is done in place, so a value you pass (`set('k', list)`)
 * is frozen for you too; pass a copy if you still need to change it.
 *
 * @example
 * ```ts
 * const addNote = defineTool({
 *   name: 'add_note',
 *   description: 'Remember a note',
 *   parameters: z.object({ note: z.string() }),
 *   execute: ({ note }) =>
 *     ToolResult.ok({ added: note }, ContextUpdate.empty().append('notes', note).logEvent('note_added', { note })),
 * })
 * ```
 */
export class ContextUpdate {
  readonly #ops: readonly Operation[];

  private constructor(ops: Operation[]) {
    // Every operation in here went through the builder's checks and is
    // frozen with its value, so the reducer can trust the array as a whole.
    this.#ops = Object.freeze(ops);
    checkedOperations.add(this.#ops);
  }

  /** The update with no operations. */
  static empty(): ContextUpdate {
    if (EMPTY === undefined) EMPTY = new ContextUpdate([]);
    return EMPTY;
  }

  /**
   * Rebuild an update from operations received from elsewhere (another
   * thread, a persisted log). Every operation is checked as if it had been
   * added through the builder; an unknown operation is an error.
   */
  static from(operations: readonly unknown[]): ContextUpdate {
    if (!Array.isArray(operations)) {
      throw new InvalidArgumentError(
        `ContextUpdate.from(operations): pass an array of operations ({ op, key, value }), got ${describeValue(operations)}`,
        { code: 'ERR_CONTEXT_UPDATE' },
      );
    }
    let update = ContextUpdate.empty();
    for (const raw of operations) {
      const op = raw as Operation;
      switch (op?.op) {
        case 'set':
          update = update.set(op.key, op.value);
          break;
        case 'merge':
          update = update.merge(op.key, op.value);
          break;
        case 'append':
          update = update.append(op.key, op.value);
          break;
        case 'delete':
          update = update.delete(op.key);
          break;
        case 'logEvent':
          update = update.logEvent(op.type, op.data);
          break;
        default:
          throw updateError(
            `unknown operation ${describeValue((raw as { op?: unknown } | null)?.op)}: an update is never applied partially`,
          );
      }
    }
    return update;
  }

  #with(op: Operation): ContextUpdate {
    return new ContextUpdate([...this.#ops, Object.freeze(op)]);
  }

  /** Replace `key` with `value` (`null` keeps the key with a null value). */
  set(key: string, value: unknown): ContextUpdate {
    checkKey(key, 'set', false);
    assertJson(value, `set "${key}"`);
    assertCloneable(value, `set "${key}"`);
    return this.#with({ op: 'set', key, value: deepFreeze(value) });
  }

  /** Deep-merge `value` into `key` (right wins; arrays and non-objects are replaced). */
  merge(key: string, value: Readonly<Record<string, unknown>>): ContextUpdate {
    checkKey(key, 'merge', false);
    if (!isPlainObject(value))
      throw updateError(`merge "${key}": the value must be a plain object, got ${typeof value}`);
    assertJson(value, `merge "${key}"`);
    assertCloneable(value, `merge "${key}"`);
    return this.#with({ op: 'merge', key, value: deepFreeze(value) });
  }

  /** Append `value` to the list at `key`; a missing or null key starts a list. */
  append(key: string, value: unknown): ContextUpdate {
    checkKey(key, 'append', false);
    assertJson(value, `append "${key}"`);
    assertCloneable(value, `append "${key}"`);
    return this.#with({ op: 'append', key, value: deepFreeze(value) });
  }

  /** Remove `key`. */
  delete(key: string): ContextUpdate {
    checkKey(key, 'delete', false);
    return this.#with({ op: 'delete', key });
  }

  /** Record a bookkeeping event in the session log; touches no metadata. */
  logEvent(type: string, data: Readonly<Record<string, unknown>> = {}): ContextUpdate {
    checkEventType(type);
    if (!isPlainObject(data)) throw updateError(`logEvent "${type}": data must be a plain object`);
    assertJson(data, `logEvent "${type}"`);
    assertCloneable(data, `logEvent "${type}"`);
    return this.#with({ op: 'logEvent', type, data: deepFreeze(data) });
  }

  /** Every operation, in the order it was added. */
  get operations(): readonly Operation[] {
    return this.#ops;
  }

  /** The `{type, data}` pairs added by `logEvent`, in order. */
  get logEvents(): readonly { readonly type: string; readonly data: Readonly<Record<string, unknown>> }[] {
    const events: { type: string; data: Readonly<Record<string, unknown>> }[] = [];
    for (const op of this.#ops) if (op.op === 'logEvent') events.push({ type: op.type, data: op.data });
    return events;
  }

  /** True when there are no operations at all (an events-only update is not empty). */
  get isEmpty(): boolean {
    return this.#ops.length === 0;
  }

  /** Concatenate: this update's operations, then `other`'s. */
  concat(other: ContextUpdate): ContextUpdate {
    if (other.#ops.length === 0) return this;
    if (this.#ops.length === 0) return other;
    return new ContextUpdate([...this.#ops, ...other.#ops]);
  }
}

let EMPTY: ContextUpdate | undefined;

// Operation arrays built by `ContextUpdate` (frozen, every op checked and
// sealed). The reducer skips re-checking these; raw arrays are checked op by op.
const checkedOperations = new WeakSet<readonly Operation[]>();

/**
 * Options of {@link reduceMetadata}.
 *
 * @example
 * ```ts
 * const options: ReduceOptions = { allowProtected: false }
 * reduceMetadata({}, [{ op: 'set', key: 'stage', value: 'draft' }], options) // { stage: 'draft' }
 * ```
 */
export interface ReduceOptions {
  /** Let library code write protected keys. Tools never get this. */
  readonly allowProtected?: boolean;
}

function unknownOperation(op: unknown): TroupeError {
  const name = typeof op === 'object' && op !== null ? (op as { op?: unknown }).op : op;
  return updateError(
    `unknown operation ${JSON.stringify(name) ?? String(name)}: an update is never applied partially; use set, merge, append, delete or logEvent`,
  );
}

// Marks a key deleted in the draft. `delete` would turn the draft into a
// slow dictionary-mode object; the tombstones are dropped once, at the end.
const DELETED: unique symbol = Symbol('troupe.deleted');

/**
 * The containers (lists, objects) a fold created. They may be changed in
 * place — so 2,000 appends to one key stay O(n) — and are frozen when the
 * fold ends. A short array rather than a Set: a fold usually owns a handful,
 * and past {@link OWNED_MAX} the oldest is frozen early (a later change to it
 * copies it again), which bounds the `includes` scan.
 */
type Owned = object[];
const OWNED_MAX = 16;

function own<T extends object>(owned: Owned, container: T): T {
  if (owned.push(container) > OWNED_MAX) Object.freeze(owned.shift());
  return container;
}

/**
 * Deep-merge `patch` into `base`: right wins, plain objects merge, anything
 * else (arrays included) is replaced. Neither input is changed: an object
 * this fold owns is changed in place, any other is copied first.
 */
function deepMerge(base: unknown, patch: Readonly<Record<string, unknown>>, owned: Owned): Record<string, unknown> {
  const out: Record<string, unknown> = isPlainObject(base)
    ? owned.includes(base)
      ? base
      : own(owned, { ...base })
    : own(owned, {});
  for (const key of Object.keys(patch)) {
    const next = patch[key];
    const current = out[key];
    const merged = isPlainObject(next) && isPlainObject(current) ? deepMerge(current, next, owned) : next;
    if (key === '__proto__') Object.defineProperty(out, key, { value: merged, enumerable: true, writable: true });
    else out[key] = merged;
  }
  return out;
}

function seal<T>(value: T): T {
  // Builder values are sealed already (one lookup); raw operations from
  // another thread are frozen here so metadata never holds a mutable value.
  return typeof value === 'object' && value !== null ? (deepFreeze(value) as T) : value;
}

/**
 * The one reducer of metadata operations. Folds `operations` over `initial`
 * in order and returns new frozen metadata (the input is never mutated; when
 * no operation touches metadata, `initial` itself is returned).
 * `logEvent` operations touch no metadata and are only checked here; an
 * unknown operation, a protected key (unless allowed), a transcript event
 * type or an append to a non-list is a typed error and nothing is applied.
 *
 * Every caller — the executor, the agent loop, the supervisor merging a
 * subagent's changes back, persistence replay — folds through here.
 *
 * Gotchas: operations built by {@link ContextUpdate} were checked when added
 * and are trusted as a whole; a raw array (from another thread, a persisted
 * log) is checked operation by operation and its values are deep-frozen.
 * Key order is not part of the result's meaning: a key deleted and set again
 * within one fold keeps its place.
 *
 * @example
 * ```ts
 * const next = reduceMetadata({ log: ['a'] }, ContextUpdate.empty().append('log', 'b').operations)
 * // { log: ['a', 'b'] }
 * ```
 */
export function reduceMetadata(
  initial: Metadata,
  operations: readonly Operation[],
  options: ReduceOptions = {},
): Metadata {
  const allowProtected = options.allowProtected === true;
  let draft: Record<string | symbol, unknown> | undefined;
  const owned: Owned = [];
  // Builder-made operations were checked and sealed when added.
  const trusted = checkedOperations.has(operations);
  // Keys marked DELETED and not set again: when none are left the draft is the result.
  let tombstones = 0;
  for (let i = 0; i < operations.length; i++) {
    const op = operations[i] as Operation;
    if (typeof op !== 'object' || op === null) throw unknownOperation(op);
    switch (op.op) {
      case 'logEvent':
        if (!trusted) checkEventType(op.type);
        break;
      case 'set': {
        if (!trusted) checkKey(op.key, 'set', allowProtected);
        draft ??= { ...initial };
        if (draft[op.key] === DELETED) tombstones--;
        draft[op.key] = trusted ? op.value : seal(op.value);
        break;
      }
      case 'merge': {
        if (!trusted) {
          checkKey(op.key, 'merge', allowProtected);
          if (!isPlainObject(op.value)) throw updateError(`merge "${op.key}": the value must be a plain object`);
        }
        draft ??= { ...initial };
        const base = draft[op.key];
        if (base === DELETED) tombstones--;
        draft[op.key] = deepMerge(base, trusted ? op.value : seal(op.value), owned);
        break;
      }
      case 'append': {
        if (!trusted) checkKey(op.key, 'append', allowProtected);
        draft ??= { ...initial };
        const current = draft[op.key];
        const item = trusted ? op.value : seal(op.value);
        if (current === undefined || current === null || current === DELETED) {
          if (current === DELETED) tombstones--;
          draft[op.key] = own(owned, [item]);
        } else if (Array.isArray(current)) {
          if (owned.includes(current)) current.push(item);
          else draft[op.key] = own(owned, [...current, item]);
        } else {
          throw updateError(
            `append "${op.key}": the current value is ${typeof current}, not a list; set it to a list first or use another key`,
          );
        }
        break;
      }
      case 'delete':
        if (!trusted) checkKey(op.key, 'delete', allowProtected);
        draft ??= { ...initial };
        if (draft[op.key] !== DELETED && Object.hasOwn(draft, op.key)) {
          draft[op.key] = DELETED;
          tombstones++;
        }
        break;
      default:
        throw unknownOperation(op);
    }
  }
  if (draft === undefined) return initial;
  for (let i = 0; i < owned.length; i++) Object.freeze(owned[i]);
  if (tombstones === 0) return Object.freeze(draft) as Metadata;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(draft)) {
    const value = draft[key];
    if (value === DELETED) continue;
    if (key === '__proto__') Object.defineProperty(out, key, { value, enumerable: true, writable: true });
    else out[key] = value;
  }
  return Object.freeze(out);
}

/**
 * Reported when events were dropped because the target has no session log.
 *
 * @example
 * ```ts
 * const { dropped } = applyContextUpdate(ContextUpdate.empty().logEvent('seen', {}), { metadata: {} }, { agentId: createId('agent'), at: 0 })
 * const lost: EventsDropped | undefined = dropped // { count: 1, types: ['seen'] }
 * ```
 */
export interface EventsDropped {
  readonly count: number;
  readonly types: readonly string[];
}

/**
 * Where an update is applied: metadata, and a session log if the target keeps one.
 *
 * @example
 * ```ts
 * const target: UpdateTarget = { metadata: { stage: 'draft' }, log: [] }
 * applyContextUpdate(ContextUpdate.empty().set('stage', 'final'), target, { agentId: createId('agent'), at: 0 })
 * ```
 */
export interface UpdateTarget {
  readonly metadata: Metadata;
  readonly log?: readonly SessionEvent[] | undefined;
}

/**
 * The result of {@link applyContextUpdate}.
 *
 * @example
 * ```ts
 * const update = ContextUpdate.empty().set('stage', 'draft').logEvent('stage_set', { stage: 'draft' })
 * const applied: AppliedUpdate = applyContextUpdate(update, { metadata: {}, log: [] }, { agentId: createId('agent'), at: Date.now() })
 * applied.metadata // { stage: 'draft' }
 * applied.events.length // 1
 * ```
 */
export interface AppliedUpdate {
  readonly metadata: Metadata;
  /** The target's log with the update's events appended, or `undefined` when it has none. */
  readonly log: readonly SessionEvent[] | undefined;
  /** The events appended by this update (empty when dropped). */
  readonly events: readonly SessionEvent[];
  /** Set when the target has no log and the update had events: say what was lost. */
  readonly dropped: EventsDropped | undefined;
}

/**
 * Apply an update to a target: metadata operations first, then events, each
 * in the order added. A target without a session log drops the events and
 * reports exactly what was lost in `dropped` (the caller emits one
 * `context.events_dropped` event for it); there is no report when there were
 * no events. Protected keys are refused again here.
 *
 * The agent's runtime calls it when a tool returns an update; call it yourself
 * to replay updates (tests, migrations). Pure: the target is not changed.
 *
 * @example
 * ```ts
 * const update = ContextUpdate.empty().append('notes', 'call back').logEvent('note_added', {})
 * const { metadata, dropped } = applyContextUpdate(update, { metadata: { notes: [] } }, { agentId: createId('agent'), at: 0 })
 * metadata // { notes: ['call back'] }
 * dropped  // { count: 1, types: ['note_added'] }: the target keeps no log
 * ```
 */
export function applyContextUpdate(
  update: ContextUpdate,
  target: UpdateTarget,
  meta: { readonly agentId: AgentId; readonly at: number },
  options: ReduceOptions = {},
): AppliedUpdate {
  const ops = update.operations;
  const metadata = reduceMetadata(target.metadata, ops, options);
  const pairs = update.logEvents;
  if (pairs.length === 0) return { metadata, log: target.log, events: [], dropped: undefined };
  if (target.log === undefined) {
    return {
      metadata,
      log: undefined,
      events: [],
      dropped: { count: pairs.length, types: [...new Set(pairs.map((p) => p.type))] },
    };
  }
  const events = pairs.map((p) => Object.freeze({ type: p.type, data: p.data, agentId: meta.agentId, at: meta.at }));
  return { metadata, log: [...target.log, ...events], events, dropped: undefined };
}
