import type { HrTime } from '@opentelemetry/api';

/**
 * A time of the supervisor's events (milliseconds since the epoch, with
 * sub-millisecond resolution) as an OpenTelemetry `HrTime`. Passed as a
 * plain number, a small value (an injected test clock's) would be read as
 * `performance.now()`-relative: an `HrTime` is never ambiguous.
 */
export function epochToHrTime(ms: number): HrTime {
  let seconds = Math.floor(ms / 1000);
  let nanos = Math.round((ms - seconds * 1000) * 1e6);
  if (nanos >= 1e9) {
    seconds += 1;
    nanos -= 1e9;
  }
  return [seconds, nanos];
}
