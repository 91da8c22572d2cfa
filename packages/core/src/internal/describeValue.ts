import { types } from 'node:util';

/** The most characters of a string or a symbol's description a message quotes. */
const MAX_QUOTED = 80;

/** `text` cut to {@link MAX_QUOTED} characters (an ellipsis marks the cut). */
export const cut = (text: string): string => (text.length > MAX_QUOTED ? `${text.slice(0, MAX_QUOTED)}…` : text);

/**
 * A value as an error message shows it: a primitive as itself (a string
 * quoted and cut), an object or function by its kind only. An object's own
 * `toString` is never called: it is the caller's code (it may throw, or
 * change something), and the default one can hold the thread — joining a
 * sparse array of length 2 ** 31 + 1 takes ~40 s before it fails. A message
 * about bad input must never throw, nor take long, itself.
 *
 * @example
 * ```ts
 * describeValue(Object.create(null)) // 'an object without a prototype'
 * describeValue(10n)                 // '10n'
 * describeValue([1, 2])              // 'an array of length 2'
 * ```
 */
export function describeValue(value: unknown): string {
  switch (typeof value) {
    case 'bigint':
      return `${value}n`;
    case 'string':
      return JSON.stringify(cut(value));
    case 'symbol':
      return `Symbol(${cut(value.description ?? '')})`;
    case 'function': {
      // Its name as an own data property only: a getter would be the caller's code again.
      const name: unknown = Object.getOwnPropertyDescriptor(value, 'name')?.value;
      return typeof name === 'string' && name !== '' ? `a function (${cut(name)})` : 'a function';
    }
    case 'object':
      return value === null ? 'null' : describeObject(value);
    default:
      return String(value); // a number, a boolean, undefined
  }
}

function describeObject(value: object): string {
  // A Proxy is asked nothing: its traps are the caller's code, and a revoked one throws on any question.
  if (types.isProxy(value)) return 'a Proxy';
  const proto: unknown = Object.getPrototypeOf(value);
  if (Array.isArray(value) && proto === Array.prototype) return `an array of length ${value.length}`;
  if (proto === null) return 'an object without a prototype';
  if (proto === Object.prototype) return 'an object';
  const ctor: unknown = Object.getOwnPropertyDescriptor(proto, 'constructor')?.value;
  const name: unknown = typeof ctor === 'function' ? Object.getOwnPropertyDescriptor(ctor, 'name')?.value : undefined;
  return typeof name === 'string' && name !== '' ? `an instance of ${cut(name)}` : 'an object';
}
