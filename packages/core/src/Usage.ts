/**
 * Token usage, summed over a model call, a run or a subtree of runs.
 * `cachedInputTokens` (part of `inputTokens` served from a prompt cache) and
 * `reasoningTokens` (part of `outputTokens` spent reasoning) are present when
 * the provider reports them.
 *
 * @example
 * ```ts
 * const usage: Usage = { inputTokens: 1200, outputTokens: 80, cachedInputTokens: 1024 }
 * ```
 */
export interface Usage {
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly cachedInputTokens?: number | undefined;
  readonly reasoningTokens?: number | undefined;
}

/**
 * No tokens: the usage of a run that called no model. One frozen object, so
 * `usage === NO_USAGE` tells a run that spent nothing without reading it.
 *
 * @example
 * ```ts
 * import { addUsage, NO_USAGE } from '@troupe/core'
 * addUsage(NO_USAGE, { inputTokens: 3, outputTokens: 1 }) // { inputTokens: 3, outputTokens: 1 }
 * ```
 */
export const NO_USAGE: Usage = Object.freeze({ inputTokens: 0, outputTokens: 0 });

const count = (n: unknown): number => (typeof n === 'number' && Number.isFinite(n) && n > 0 ? n : 0);

/**
 * `a + b`, field by field; the optional counts appear once either side has them.
 *
 * `b` may be `undefined` (a call that reported nothing): the result is `a`.
 * Missing counts in either side count as 0.
 *
 * @example
 * ```ts
 * addUsage({ inputTokens: 10, outputTokens: 2 }, { inputTokens: 5, outputTokens: 1, cachedInputTokens: 4 })
 * // { inputTokens: 15, outputTokens: 3, cachedInputTokens: 4 }
 * ```
 */
export function addUsage(a: Usage, b: Usage | undefined): Usage {
  if (b === undefined) return a;
  const cached =
    a.cachedInputTokens === undefined && b.cachedInputTokens === undefined
      ? undefined
      : count(a.cachedInputTokens) + count(b.cachedInputTokens);
  const reasoning =
    a.reasoningTokens === undefined && b.reasoningTokens === undefined
      ? undefined
      : count(a.reasoningTokens) + count(b.reasoningTokens);
  const sum: { inputTokens: number; outputTokens: number; cachedInputTokens?: number; reasoningTokens?: number } = {
    inputTokens: count(a.inputTokens) + count(b.inputTokens),
    outputTokens: count(a.outputTokens) + count(b.outputTokens),
  };
  if (cached !== undefined) sum.cachedInputTokens = cached;
  if (reasoning !== undefined) sum.reasoningTokens = reasoning;
  return sum;
}

/**
 * `a - b`, field by field (cached and reasoning tokens too), never below zero: what a
 * total holds beyond a part of it (a run that never started reports none). `a` itself
 * when `b` is zero.
 *
 * @example
 * ```ts
 * subtractUsage({ inputTokens: 10, outputTokens: 4 }, { inputTokens: 3, outputTokens: 1 })
 * // { inputTokens: 7, outputTokens: 3 }
 * ```
 */
export function subtractUsage(a: Usage, b: Usage): Usage {
  if (b.inputTokens === 0 && b.outputTokens === 0 && !b.cachedInputTokens && !b.reasoningTokens) return a;
  const out: { inputTokens: number; outputTokens: number; cachedInputTokens?: number; reasoningTokens?: number } = {
    inputTokens: Math.max(0, a.inputTokens - b.inputTokens),
    outputTokens: Math.max(0, a.outputTokens - b.outputTokens),
  };
  if (a.cachedInputTokens !== undefined)
    out.cachedInputTokens = Math.max(0, a.cachedInputTokens - (b.cachedInputTokens ?? 0));
  if (a.reasoningTokens !== undefined) out.reasoningTokens = Math.max(0, a.reasoningTokens - (b.reasoningTokens ?? 0));
  return out;
}

/**
 * True when `a` and `b` count the same tokens in every field (an optional count
 * present on one side only makes them differ).
 *
 * @example
 * ```ts
 * usageEquals({ inputTokens: 1, outputTokens: 2 }, { inputTokens: 1, outputTokens: 2 }) // true
 * ```
 */
export function usageEquals(a: Usage, b: Usage): boolean {
  return (
    a.inputTokens === b.inputTokens &&
    a.outputTokens === b.outputTokens &&
    a.cachedInputTokens === b.cachedInputTokens &&
    a.reasoningTokens === b.reasoningTokens
  );
}

const isCount = (v: unknown): boolean => typeof v === 'number' && Number.isFinite(v) && v >= 0;

/**
 * True for a {@link Usage} (the optional counts, when present, are finite and ≥ 0):
 * what a value from another thread or a store must be before it is summed.
 *
 * @example
 * ```ts
 * isUsage({ inputTokens: 1, outputTokens: 0 }) // true
 * isUsage({ inputTokens: -1, outputTokens: 0 }) // false
 * ```
 */
export function isUsage(v: unknown): v is Usage {
  if (typeof v !== 'object' || v === null) return false;
  const u = v as Usage;
  return (
    isCount(u.inputTokens) &&
    isCount(u.outputTokens) &&
    (u.cachedInputTokens === undefined || isCount(u.cachedInputTokens)) &&
    (u.reasoningTokens === undefined || isCount(u.reasoningTokens))
  );
}
