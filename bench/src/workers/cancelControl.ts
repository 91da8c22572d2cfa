// The control layout shared by the `cancel` suite and its worker (kept apart so
// importing it does not run the worker).

/** Control words shared with the suite. */
export const CTL = {
  /** Trial number, bumped by the main thread to start a trial. */
  SEQ: 0,
  INDEX: 1,
  GENERATION: 2,
  /** Trial number the worker is ready for (spinning, or idle with a bridged signal). */
  READY: 3,
  /** Trial number whose cancel the worker observed; the time is in `times[0]`. */
  DONE: 4,
  /** Set to 1 to make the worker exit. */
  STOP: 5,
} as const;

/** What the suite passes in `workerData`. */
export interface CancelWorkerData {
  readonly mode: 'poll' | 'signal' | 'busy';
  readonly buffer: SharedArrayBuffer;
  /** Int32 control words (see {@link CTL}) followed by one Float64 time at byte 32. */
  readonly control: SharedArrayBuffer;
}
