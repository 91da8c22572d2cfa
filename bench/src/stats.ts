import { quantile } from '@troupe/supervisor/internal';

export { quantile };

/** Median of a sample (not mutated). */
export function median(values: readonly number[]): number {
  return quantile(values, 0.5);
}

/** High-resolution time in nanoseconds as a number. */
export function nowNs(): number {
  return Number(process.hrtime.bigint());
}

/**
 * Time a synchronous operation: `batches` samples of `perBatch` calls each,
 * after a warm-up; returns ns per call for each batch.
 */
export function timeSync(fn: () => unknown, options: { batches: number; perBatch: number; warmup?: number }): number[] {
  const warmup = options.warmup ?? options.perBatch;
  for (let i = 0; i < warmup; i++) sink = fn();
  const samples: number[] = [];
  for (let b = 0; b < options.batches; b++) {
    const start = nowNs();
    // Each result is stored where V8 cannot prove it unused: an allocation the
    // optimiser could elide (escape analysis) would make the figure a fiction.
    for (let i = 0; i < options.perBatch; i++) sink = fn();
    samples.push((nowNs() - start) / options.perBatch);
  }
  return samples;
}

/** Where timed results go so the optimiser keeps the work that made them. */
export let sink: unknown;

/** Time an async operation one call at a time; returns µs per call. */
export async function timeAsync(
  fn: () => Promise<unknown>,
  options: { samples: number; warmup?: number },
): Promise<number[]> {
  const warmup = options.warmup ?? Math.min(100, options.samples);
  for (let i = 0; i < warmup; i++) await fn();
  const out: number[] = [];
  for (let i = 0; i < options.samples; i++) {
    const start = nowNs();
    await fn();
    out.push((nowNs() - start) / 1000);
  }
  return out;
}

/** Round to 3 significant digits for display. */
export function round(value: number): number {
  if (!Number.isFinite(value) || value === 0) return value;
  const digits = Math.max(0, 2 - Math.floor(Math.log10(Math.abs(value))));
  return Number(value.toFixed(Math.min(digits, 6)));
}
