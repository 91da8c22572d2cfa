import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { isTroupeError } from '@troupe/core';
import { formatBytes } from '@troupe/core/internal';
import { MAX_MEASURED_HOPS, measureScopeCost } from '@troupe/supervisor';
import { BenchInputError } from '../BenchInputError.js';
import type { Figure } from '../Suite.js';
import { type FlagValues, intFlag, stringFlag } from '../SuiteFlags.js';
import { median, round } from '../stats.js';

export { formatBytes };

function formatUs(us: number): string {
  return us >= 10_000 ? `${(us / 1000).toFixed(1)} ms` : `${round(us)} µs`;
}

/**
 * `pnpm bench scope --file my-scope.json [--hops n] [--samples n] [--new-scope-samples n] [--budget bytes]`:
 * measure an integrator's own scope with `measureScopeCost` and print the
 * per-hop cost, the size against the budget and the heaviest top-level keys.
 */
export async function measureScopeFile(flags: FlagValues, progress: (m: string) => void): Promise<Figure[]> {
  const name = stringFlag(flags, 'file');
  if (name === undefined || name === '') throw new BenchInputError('--file needs the path of a JSON file');
  const hops = intFlag(flags, 'hops', 1, 1, MAX_MEASURED_HOPS);
  const samples = intFlag(flags, 'samples', 300, 1, 100_000);
  const newScopeSamples = intFlag(flags, 'new-scope-samples', 20, 0, 100_000);
  const budgetBytes = intFlag(flags, 'budget', 4096, 1, 2 ** 31);
  // pnpm runs scripts from the workspace root; a relative path means the caller's directory.
  const file = resolve(process.env.INIT_CWD ?? process.cwd(), name);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new BenchInputError(`${file}: cannot read it (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
  }
  let scope: unknown;
  try {
    scope = JSON.parse(text);
  } catch (error) {
    throw new BenchInputError(`${file} is not JSON: ${(error as Error).message}; pass the scope as a JSON document`);
  }
  progress(`scope: measuring ${name} over ${hops} hop(s), ${samples} runs`);
  let cost: Awaited<ReturnType<typeof measureScopeCost>>;
  try {
    cost = await measureScopeCost(scope, { hops, samples, budgetBytes, newScopeSamples });
  } catch (error) {
    if (isTroupeError(error, 'ERR_NOT_CLONEABLE') || isTroupeError(error, 'ERR_INVALID_ARGUMENT')) {
      throw new BenchInputError(`${file}: ${(error as Error).message}`);
    }
    throw error;
  }
  const over = cost.bytes / cost.budgetBytes;
  const lines = [
    `${file}`,
    `  size     ${formatBytes(cost.bytes)} (${cost.bytes} B) against a ${formatBytes(cost.budgetBytes)} budget: ${
      cost.overBudget
        ? `OVER by ${formatBytes(cost.bytes - cost.budgetBytes)} (${over.toFixed(1)}×): a supervisor refuses it; pass a lean projection or raise scopeBudgetBytes`
        : `${Math.round(over * 100)}% of it`
    }`,
    `  per hop  median ${formatUs(cost.perHopUs.median)}, p95 ${formatUs(cost.perHopUs.p95)} (${cost.hops} hop(s), ${samples} runs; supervisor thread busy ${formatUs(cost.mainThreadPerHopUs.median)} per hop)`,
    `  clone    structuredClone of the same scope: ${formatUs(cost.cloneUs)} (a hop costs ${(cost.perHopUs.median / cost.cloneUs).toFixed(1)}× a clone)`,
  ];
  const runMedian = median(cost.runsUs);
  const fresh = cost.newScopeRunUs;
  if (fresh !== undefined) {
    lines.push(
      `  new      a scope object never seen (one per request in a daemon): ${formatUs(fresh.median)} per run, ${formatUs(fresh.median - runMedian)} more than a run whose scope was sealed before (checked, frozen and measured at the edge${cost.bytes >= 8 * 1024 ? '; serialized once, decoded once per worker' : ''})`,
    );
  }
  if (cost.keys.length > 0) {
    lines.push('  heaviest top-level keys:');
    for (const k of cost.keys.slice(0, 8)) {
      lines.push(
        `    ${k.key.padEnd(24)} ${formatBytes(k.bytes).padStart(10)}  ${(k.share * 100).toFixed(1).padStart(5)}%`,
      );
    }
    if (cost.keys.length > 8) lines.push(`    … and ${cost.keys.length - 8} more`);
  }
  if (hops === 1) lines.push('  (--hops n measures a chain of n subagents, each delegating to the next)');
  console.log(`${lines.join('\n')}\n`);
  return [
    {
      suite: 'scope',
      name: 'scope.file.hop_us',
      value: round(cost.perHopUs.median),
      unit: 'µs',
      baseline: { name: 'structuredClone of the same scope', value: round(cost.cloneUs) },
      ratio: round(cost.perHopUs.median / cost.cloneUs),
      detail: {
        file: name,
        bytes: cost.bytes,
        budget: cost.budgetBytes,
        hops: cost.hops,
        p95: round(cost.perHopUs.p95),
        main_us: round(cost.mainThreadPerHopUs.median),
        samples,
        ...(fresh === undefined
          ? {}
          : { new_scope_run_us: round(fresh.median), new_scope_extra_us: round(fresh.median - runMedian) }),
      },
    },
  ];
}
