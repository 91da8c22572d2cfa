// `pnpm bench ab --against <dir>`: this build against another built checkout, in one
// process, blocks interleaved. On a machine that changes speed within seconds, two full
// runs cannot tell a 2 µs change from the weather; two builds measured side by side can.
import { existsSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Agent } from '@troupe/core';
import { BenchInputError } from '../BenchInputError.js';
import type { Figure, SuiteBody, SuiteContext } from '../Suite.js';
import { type FlagValues, intFlag, stringFlag } from '../SuiteFlags.js';
import { CopyBaselines } from '../scope/CopyBaselines.js';
import { generateLeanUser } from '../scope/generateUserGraph.js';
import { median, nowNs, round } from '../stats.js';

const suite = 'ab';

/** What one build offers the comparison, imported from its own dist files. */
interface Build {
  readonly createSupervisor: (options: object) => BuildSupervisor;
  readonly deepFreeze: <T>(value: T) => T;
  /** The one-hop and two-hop chains of `measureScopeCost`. */
  readonly oneHop: Agent;
  readonly twoHops: Agent;
  /** A parent that delegates to 100 subagents in one turn (bench/src/agents/overhead.ts). */
  readonly fanout: Agent;
}

interface BuildSupervisor {
  readonly pool: { ready(): Promise<void> };
  spawn(agent: Agent, options: { input: string; scope: unknown }): Promise<{ status: string }>;
  startAgent(agent: Agent, options: { scope: unknown }): Promise<{ id: string; send(m: string): Promise<Reply> }>;
  stopAgent(id: string): Promise<void>;
  close(): Promise<void>;
}

interface Reply {
  readonly status: string;
  readonly text?: string;
}

const FILES = {
  supervisor: 'packages/supervisor/dist/index.js',
  chains: 'packages/supervisor/dist/measureScopeCost.js',
  core: 'packages/core/dist/index.js',
  agents: 'bench/dist/agents/overhead.js',
} as const;

function abArgs(flags: FlagValues): { against: string; blocks: number | undefined } {
  const against = stringFlag(flags, 'against');
  const blocks = flags.blocks === undefined ? undefined : intFlag(flags, 'blocks', 0, 2, 200);
  if (against === undefined || against === '') {
    throw new BenchInputError(
      'ab needs --against <dir>: a checkout to compare this build with, built first (git worktree add ../base <rev> && cd ../base && pnpm install && npx tsc -b); --against . measures this build against itself (the noise floor)',
    );
  }
  return { against: resolve(against), blocks };
}

async function loadBuild(root: string): Promise<Build> {
  if (!existsSync(root) || !statSync(root).isDirectory()) {
    throw new BenchInputError(`${root}: not a directory; pass the root of a built Troupe checkout to --against`);
  }
  for (const file of Object.values(FILES)) {
    if (!existsSync(join(root, file))) {
      throw new BenchInputError(
        `${root}: no ${file}; build that checkout first (cd ${root} && pnpm install && npx tsc -b)`,
      );
    }
  }
  const load = (file: string) => import(pathToFileURL(join(root, file)).href) as Promise<Record<string, unknown>>;
  const [supervisor, chains, core, agents] = await Promise.all([
    load(FILES.supervisor),
    load(FILES.chains),
    load(FILES.core),
    load(FILES.agents),
  ]);
  const oneHop = chains.scopeCostHop8;
  const twoHops = chains.scopeCostHop7;
  if (oneHop === undefined || twoHops === undefined || agents.fanout100 === undefined) {
    throw new BenchInputError(`${root}: this checkout is too old to compare with (no measureScopeCost chains)`);
  }
  return {
    createSupervisor: supervisor.createSupervisor as Build['createSupervisor'],
    deepFreeze: core.deepFreeze as Build['deepFreeze'],
    oneHop: oneHop as Agent,
    twoHops: twoHops as Agent,
    fanout: agents.fanout100 as Agent,
  };
}

async function timeSpawns(sup: BuildSupervisor, agent: Agent, scope: unknown, n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const start = nowNs();
    const outcome = await sup.spawn(agent, { input: 'x', scope });
    out.push((nowNs() - start) / 1000);
    if (outcome.status !== 'done') throw new Error(`ab: a chain ended ${outcome.status}`);
  }
  return out;
}

async function fanoutTurnMs(sup: BuildSupervisor, agent: Agent, scope: unknown): Promise<number> {
  const start = nowNs();
  const ref = await sup.startAgent(agent, { scope });
  const reply = await ref.send('go');
  const ms = (nowNs() - start) / 1e6;
  if (reply.status !== 'done') throw new Error(`ab: the fan-out turn ended ${reply.status}`);
  await sup.stopAgent(ref.id);
  return ms;
}

/** Paired figure: this build's median, the other's as baseline, the median of per-block differences. */
function paired(name: string, unit: string, base: number[], ours: number[], against: string, what: string): Figure {
  const diffs = ours.map((v, i) => v - (base[i] as number));
  return {
    suite,
    name,
    value: round(median(ours)),
    unit,
    baseline: { name: `the build at ${against}`, value: round(median(base)) },
    detail: {
      meaning: what,
      paired_diff: round(median(diffs)),
      min_diff: round(Math.min(...diffs)),
      max_diff: round(Math.max(...diffs)),
      pairs: diffs.length,
    },
  };
}

async function run({ quick, progress, flags }: SuiteContext): Promise<Figure[]> {
  const { against, blocks: blocksArg } = abArgs(flags);
  const here = fileURLToPath(new URL('../../..', import.meta.url));
  const base = await loadBuild(against);
  const ours = await loadBuild(here);
  const blocks = blocksArg ?? (quick ? 4 : 12);
  const perBlock = quick ? 60 : 300;
  const trials = quick ? 10 : 60;
  const builds = [base, ours];
  const supervisors = builds.map((b) => b.createSupervisor({ pool: { threads: 2 }, persistence: null }));
  const baselines = await CopyBaselines.start(2);
  try {
    await Promise.all(supervisors.map((s) => s.pool.ready()));
    const lean = generateLeanUser();
    const scopes = builds.map((b) => b.deepFreeze(structuredClone(lean)));
    // The same warm-up in a quick run: with less, a quick run read cold code (own cost 19 µs, not 7).
    progress(`ab: warming up both builds (${against} and this one)`);
    for (let i = 0; i < 2; i++) {
      for (const [b, build] of builds.entries()) {
        const sup = supervisors[b] as BuildSupervisor;
        await timeSpawns(sup, build.oneHop, scopes[b], 1000);
        await timeSpawns(sup, build.twoHops, scopes[b], 300);
        // 80 fan-out turns in all, as `fanoutTrials` warms up (a fresh supervisor's turn is steady after 60–80).
        for (let f = 0; f < 40; f++) await fanoutTurnMs(sup, build.fanout, scopes[b]);
      }
    }
    await baselines.piscinaRttUs(lean, 200);
    const own: number[][] = [[], []];
    const nested: number[][] = [[], []];
    for (let k = 0; k < blocks; k++) {
      progress(`ab: block ${k + 1}/${blocks}`);
      const piscina = median(await baselines.piscinaRttUs(lean, quick ? 40 : 150));
      // Alternate which build goes first, so neither always follows the piscina burst.
      for (const b of k % 2 === 0 ? [0, 1] : [1, 0]) {
        const build = builds[b] as Build;
        const sup = supervisors[b] as BuildSupervisor;
        const one = median(await timeSpawns(sup, build.oneHop, scopes[b], perBlock));
        const two = median(await timeSpawns(sup, build.twoHops, scopes[b], perBlock));
        (own[b] as number[]).push(one - piscina);
        (nested[b] as number[]).push(two - one);
      }
    }
    const fanout: number[][] = [[], []];
    for (let t = 0; t < trials; t++) {
      if (t % 10 === 0) progress(`ab: fan-out ${t}/${trials}`);
      for (const b of t % 2 === 0 ? [0, 1] : [1, 0]) {
        (fanout[b] as number[]).push(
          await fanoutTurnMs(supervisors[b] as BuildSupervisor, (builds[b] as Build).fanout, scopes[b]),
        );
      }
    }
    const [baseOwn, ourOwn] = own as [number[], number[]];
    const [baseNested, ourNested] = nested as [number[], number[]];
    const [baseFanout, ourFanout] = fanout as [number[], number[]];
    return [
      paired(
        'ab.lean_own_us',
        'µs',
        baseOwn,
        ourOwn,
        against,
        'per block: median one-hop spawn minus median raw piscina round trip (2 threads each)',
      ),
      paired(
        'ab.nested_hop_us',
        'µs',
        baseNested,
        ourNested,
        against,
        'per block: median two-hop chain minus median one-hop chain',
      ),
      paired(
        'ab.fanout_turn_ms',
        'ms',
        baseFanout,
        ourFanout,
        against,
        'a parent turn delegating to 100 subagents, trials alternating',
      ),
    ];
  } finally {
    await Promise.all([...supervisors.map((s) => s.close()), baselines.close()]);
  }
}

/** This build against another built checkout, side by side in one process. */
export const abSuite: SuiteBody = {
  run,
};
