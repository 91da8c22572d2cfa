import { types } from 'node:util';
import { cut, describeValue } from './internal/describeValue.js';
import { InvalidArgumentError } from './TroupeError.js';

// Built-ins that structured clone copies faithfully. Anything else with a
// prototype of its own is a class instance: clone would silently drop its
// prototype and private state, so it is refused rather than mangled.
const CLONEABLE_BUILTINS: readonly (abstract new (...args: never[]) => unknown)[] = [
  Date,
  RegExp,
  Map,
  Set,
  ArrayBuffer,
  DataView,
  Boolean,
  Number,
  String,
  BigInt64Array,
  BigUint64Array,
  Float32Array,
  Float64Array,
  Int8Array,
  Int16Array,
  Int32Array,
  Uint8Array,
  Uint8ClampedArray,
  Uint16Array,
  Uint32Array,
];

// What a refused value is, asking it nothing (describeValue reads no getter and calls no toString).
function describe(value: unknown): string {
  if (typeof value === 'symbol') return `a symbol (${cut(value.description ?? '')})`;
  return describeValue(value);
}

function segment(key: string | number): string {
  if (typeof key === 'number') return `[${key}]`;
  return /^[A-Za-z_$][\w$]*$/.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`;
}

/**
 * The path of the value a Map holds under `key`, the `i`-th key: `.get("a")`
 * for a primitive key, `.get(<key 3>)` for an object or a symbol, which has no
 * text of its own to show (String() of a null-prototype object throws; of
 * another object, it runs the caller's code).
 */
function mapEntry(key: unknown, i: number): string {
  switch (typeof key) {
    case 'string':
      return `.get(${JSON.stringify(key)})`;
    case 'number':
    case 'boolean':
    case 'undefined':
      return `.get(${String(key)})`;
    case 'bigint':
      return `.get(${key}n)`;
    default:
      return key === null ? '.get(null)' : `.get(<key ${i}>)`;
  }
}

/**
 * The own keys of an array when it has holes or named properties (structured
 * clone writes both: the walks must see both), or `undefined` for a dense
 * array with neither, the common case, walked by index. Index keys come first
 * in `Object.keys` order, so a dense array's last key is its last index.
 * Anything that walks or copies user data by index should use it: a sparse
 * array of length 2 ** 31 holds one element.
 */
export function irregularKeys(arr: readonly unknown[]): string[] | undefined {
  const keys = Object.keys(arr);
  const n = arr.length;
  if (keys.length === n && (n === 0 || keys[n - 1] === String(n - 1))) return undefined;
  return keys;
}

function isCloneableBuiltin(obj: object): boolean {
  for (const ctor of CLONEABLE_BUILTINS) {
    if (obj instanceof ctor && Object.getPrototypeOf(obj) === ctor.prototype) return true;
  }
  return false;
}

/**
 * True when `value` can cross a thread faithfully (the rules of
 * {@link findUncloneable}), checked without building a single path: the walk
 * a seal pays for every scope it has not seen. When `objects` is given, every
 * object reached is pushed to it once (so a caller can freeze them without a
 * second walk); on `false` it holds an unspecified part of them.
 *
 * The cheap check; when it says `false`, {@link findUncloneable} says where.
 *
 * @example
 * ```ts
 * isCloneable({ at: new Date(), tags: new Set(['a']) }) // true
 * isCloneable({ onDone: () => {} })                     // false
 * ```
 */
export function isCloneable(value: unknown, objects?: object[]): boolean {
  return walkCloneable(value, objects, false) >= 0;
}

/**
 * {@link isCloneable} that also bounds the size: -1 when `value` cannot
 * cross a thread; otherwise an upper bound of its `v8.serialize` size in
 * bytes for JSON-like data (plain objects, arrays, strings, numbers,
 * booleans, null, undefined, bigints; shared objects and cycles included),
 * or `Infinity` when it holds anything else (Date, Map, typed arrays, ...),
 * whose size only a serialization tells. Lets a seal check a lean scope
 * against its budget without serializing it (`v8.serialize` of a six-field
 * object costs ~5 µs, more than the rest of the seal).
 */
export function cloneableSizeBound(value: unknown, objects?: object[]): number {
  return walkCloneable(value, objects, true);
}

// What V8's serializer (format 15) writes at most, in bytes. Strings: a
// padding byte, a tag, a length varint (<= 5), two bytes per UTF-16 unit.
// Numbers: a tag and a double. An object: tags and a count varint around its
// keys and values; an array: the same, plus an index key per element (a
// frozen array is written sparse). A repeated object: a back-reference.
const HEADER_BOUND = 3;
const NUMBER_BOUND = 9;
const OBJECT_BOUND = 7;
const ARRAY_BOUND = 16;
const INDEX_BOUND = 9;
const REFERENCE_BOUND = 6;
const stringBound = (s: string): number => 2 * s.length + 7;

function primitiveBound(v: unknown): number {
  switch (typeof v) {
    case 'string':
      return stringBound(v);
    case 'number':
      return NUMBER_BOUND;
    case 'bigint':
      // A sign-and-length varint, then 64-bit digits.
      return 6 + 8 * Math.ceil((v < 0n ? -v : v).toString(16).length / 16);
    default:
      // true, false, null, undefined: one tag.
      return 1;
  }
}

function walkCloneable(value: unknown, objects: object[] | undefined, sized: boolean): number {
  const t = typeof value;
  if (t === 'function' || t === 'symbol') return -1;
  if (t !== 'object' || value === null) return sized ? HEADER_BOUND + primitiveBound(value) : 0;
  let bound = HEADER_BOUND;
  const seen = new Set<object>();
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    const type = typeof v;
    if (type === 'function' || type === 'symbol') return -1;
    if (type !== 'object' || v === null) {
      // Map and Set entries are pushed whatever their type: only sized walks count them (as Infinity).
      continue;
    }
    const obj = v as object;
    if (seen.has(obj)) {
      bound += REFERENCE_BOUND;
      continue;
    }
    seen.add(obj);
    // Structured clone refuses a Proxy whatever it wraps.
    if (types.isProxy(obj)) return -1;
    objects?.push(obj);
    const proto = Object.getPrototypeOf(obj);
    if (Array.isArray(obj)) {
      // An Array subclass would arrive as a plain array, its methods gone.
      if (proto !== Array.prototype) return -1;
      const keys = irregularKeys(obj);
      if (keys === undefined) {
        if (sized) bound += ARRAY_BOUND + INDEX_BOUND * obj.length;
        for (let i = 0; i < obj.length; i++) {
          const item: unknown = obj[i];
          if (typeof item === 'object' ? item !== null : typeof item === 'function' || typeof item === 'symbol')
            stack.push(item);
          else if (sized) bound += primitiveBound(item);
        }
      } else {
        // Holes or named properties: written key by key (an index key costs no more than its string).
        if (sized) bound += ARRAY_BOUND;
        for (const key of keys) {
          const item: unknown = (obj as unknown as Record<string, unknown>)[key];
          if (sized) bound += stringBound(key);
          if (typeof item === 'object' ? item !== null : typeof item === 'function' || typeof item === 'symbol')
            stack.push(item);
          else if (sized) bound += primitiveBound(item);
        }
      }
      continue;
    }
    if (proto !== Object.prototype && proto !== null) {
      if (obj instanceof Map) {
        bound = Number.POSITIVE_INFINITY;
        for (const [k, item] of obj) stack.push(k, item);
        continue;
      }
      if (obj instanceof Set) {
        bound = Number.POSITIVE_INFINITY;
        for (const item of obj) stack.push(item);
        continue;
      }
      if (isCloneableBuiltin(obj)) {
        bound = Number.POSITIVE_INFINITY;
        continue;
      }
      return -1;
    }
    if (Object.getOwnPropertySymbols(obj).length > 0) return -1;
    if (sized) bound += OBJECT_BOUND;
    for (const key of Object.keys(obj)) {
      const item: unknown = (obj as Record<string, unknown>)[key];
      if (sized) bound += stringBound(key);
      if (typeof item === 'object' ? item !== null : typeof item === 'function' || typeof item === 'symbol')
        stack.push(item);
      else if (sized) bound += primitiveBound(item);
    }
  }
  return sized ? bound : 0;
}

/**
 * Find the path of the first value that cannot cross a thread faithfully, or
 * `undefined` when the whole value is structured-cloneable. Functions,
 * symbols, class instances, promises, weak collections and errors are refused;
 * plain objects, arrays, primitives and the data built-ins (Date, RegExp,
 * Map, Set, ArrayBuffer, typed arrays) are accepted; cycles are fine.
 *
 * Use it to report where a value goes wrong; {@link assertCloneable} throws with it.
 *
 * @example
 * ```ts
 * findUncloneable({ user: { save() {} } }, 'scope')
 * // { path: 'scope.user.save', what: 'a function (save)' }
 * ```
 */
export function findUncloneable(value: unknown, root = 'value'): { path: string; what: string } | undefined {
  // The common case, a cloneable value, is answered without building paths;
  // only a refused value is walked again to name the offending path.
  if (isCloneable(value)) return undefined;
  const seen = new Set<object>();
  const walk = (v: unknown, path: string): { path: string; what: string } | undefined => {
    const t = typeof v;
    if (t === 'function' || t === 'symbol') return { path, what: describe(v) };
    if (t !== 'object' || v === null) return undefined;
    const obj = v as object;
    if (seen.has(obj)) return undefined;
    seen.add(obj);
    if (types.isProxy(obj)) return { path, what: 'a Proxy (structured clone refuses it)' };
    if (Array.isArray(obj)) {
      // An Array subclass would arrive as a plain array, its methods gone.
      if (Object.getPrototypeOf(obj) !== Array.prototype) return { path, what: describe(obj) };
      const keys = irregularKeys(obj);
      if (keys === undefined) {
        for (let i = 0; i < obj.length; i++) {
          const bad = walk(obj[i], `${path}[${i}]`);
          if (bad !== undefined) return bad;
        }
      } else {
        for (const key of keys) {
          const index = Number(key);
          const at = Number.isInteger(index) && String(index) === key ? `[${key}]` : segment(key);
          const bad = walk((obj as unknown as Record<string, unknown>)[key], `${path}${at}`);
          if (bad !== undefined) return bad;
        }
      }
      return undefined;
    }
    const proto = Object.getPrototypeOf(obj);
    if (proto !== Object.prototype && proto !== null) {
      if (obj instanceof Map) {
        let i = 0;
        for (const [k, item] of obj) {
          const bad = walk(k, `${path}.<key ${i}>`) ?? walk(item, `${path}${mapEntry(k, i)}`);
          if (bad !== undefined) return bad;
          i++;
        }
        return undefined;
      }
      if (obj instanceof Set) {
        let i = 0;
        for (const item of obj) {
          const bad = walk(item, `${path}.<item ${i}>`);
          if (bad !== undefined) return bad;
          i++;
        }
        return undefined;
      }
      if (isCloneableBuiltin(obj)) return undefined;
      return { path, what: describe(obj) };
    }
    const symbols = Object.getOwnPropertySymbols(obj);
    if (symbols.length > 0) {
      return { path: `${path}[${String(symbols[0])}]`, what: 'a symbol-keyed property (structured clone drops it)' };
    }
    for (const key of Object.keys(obj)) {
      const bad = walk((obj as Record<string, unknown>)[key], `${path}${segment(key)}`);
      if (bad !== undefined) return bad;
    }
    return undefined;
  };
  return walk(value, root);
}

/**
 * Throw an `InvalidArgumentError` (code `ERR_NOT_CLONEABLE`) naming the path
 * of the first value that cannot cross a thread. Call it at the edge, before
 * anything is posted.
 *
 * @example
 * ```ts
 * assertCloneable({ user: { save() {} } }, 'scope')
 * // throws: scope.user.save is a function (save): ...
 * ```
 */
export function assertCloneable(value: unknown, root = 'value'): void {
  const bad = findUncloneable(value, root);
  if (bad !== undefined) {
    throw new InvalidArgumentError(
      `${bad.path} is ${bad.what}: only plain data (objects, arrays, primitives, Date, Map, Set, typed arrays) can cross a thread; pass plain data instead`,
      { code: 'ERR_NOT_CLONEABLE' },
    );
  }
}
