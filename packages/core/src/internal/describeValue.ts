/**
 * A value as an error message shows it: `String(value)` where that works, and
 * a description where it throws (an object without a prototype, a proxy whose
 * traps throw) — a message about bad input must never throw itself.
 *
 * @example
 * ```ts
 * describeValue(Object.create(null)) // 'an object without a prototype'
 * describeValue(10n)                 // '10n'
 * ```
 */
export function describeValue(value: unknown): string {
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'string') return JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}…` : value);
  try {
    return String(value);
  } catch {
    if (typeof value !== 'object' || value === null) return typeof value;
    try {
      return Object.getPrototypeOf(value) === null ? 'an object without a prototype' : 'an object';
    } catch {
      return 'an object';
    }
  }
}
