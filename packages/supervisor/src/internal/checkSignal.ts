import { InvalidArgumentError } from '@troupe/core';
import { describeValue } from '@troupe/core/internal';

/**
 * Refuse a `signal` option that is not an `AbortSignal` (of this realm or
 * another: what a signal does is checked, not its class), naming the call.
 */
export function checkSignal(signal: unknown, call: string): AbortSignal | undefined {
  if (signal === undefined) return undefined;
  const s = signal as { aborted?: unknown; addEventListener?: unknown; removeEventListener?: unknown } | null;
  if (
    typeof s !== 'object' ||
    s === null ||
    typeof s.aborted !== 'boolean' ||
    typeof s.addEventListener !== 'function' ||
    typeof s.removeEventListener !== 'function'
  ) {
    throw new InvalidArgumentError(
      `${call}: signal must be an AbortSignal (new AbortController().signal, AbortSignal.timeout(ms)), got ${describeValue(signal)}`,
    );
  }
  return signal as AbortSignal;
}
