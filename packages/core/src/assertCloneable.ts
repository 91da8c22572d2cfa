import { InvalidArgumentError } from './TroupeError.js';

const PLAIN_PROTOTYPES = new Set<unknown>([Object.prototype, null]);

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

function describe(value: unknown): string {
  if (typeof value === 'function') return `a function${value.name ? ` (${value.name})` : ''}`;
  if (typeof value === 'symbol') return `a symbol (${String(value.description)})`;
  const ctor = (value as { constructor?: { name?: string } }).constructor;
  return `an instance of ${ctor?.name ?? 'an unknown class'}`;
}

function segment(key: string | number): string {
  if (typeof key === 'number') return `[${key}]`;
  return /^[A-Za-z_$][\w$]*$/.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`;
}

/**
 * Find the path of the first value that cannot cross a thread faithfully, or
 * `undefined` when the whole value is structured-cloneable. Functions,
 * symbols, class instances, promises, weak collections and errors are refused;
 * plain objects, arrays, primitives and the data built-ins (Date, RegExp,
 * Map, Set, ArrayBuffer, typed arrays) are accepted; cycles are fine.
 */
export function findUncloneable(value: unknown, root = 'value'): { path: string; what: string } | undefined {
  const seen = new Set<object>();
  const walk = (v: unknown, path: string): { path: string; what: string } | undefined => {
    const t = typeof v;
    if (t === 'function' || t === 'symbol') return { path, what: describe(v) };
    if (t !== 'object' || v === null) return undefined;
    const obj = v as object;
    if (seen.has(obj)) return undefined;
    seen.add(obj);
    if (Array.isArray(obj)) {
      // An Array subclass would arrive as a plain array, its methods gone.
      if (Object.getPrototypeOf(obj) !== Array.prototype) return { path, what: describe(obj) };
      for (let i = 0; i < obj.length; i++) {
        const bad = walk(obj[i], `${path}[${i}]`);
        if (bad !== undefined) return bad;
      }
      return undefined;
    }
    const proto = Object.getPrototypeOf(obj);
    if (!PLAIN_PROTOTYPES.has(proto)) {
      if (obj instanceof Map) {
        let i = 0;
        for (const [k, item] of obj) {
          const bad = walk(k, `${path}.<key ${i}>`) ?? walk(item, `${path}.get(${JSON.stringify(String(k))})`);
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
      for (const ctor of CLONEABLE_BUILTINS) {
        if (obj instanceof ctor && Object.getPrototypeOf(obj) === ctor.prototype) return undefined;
      }
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
