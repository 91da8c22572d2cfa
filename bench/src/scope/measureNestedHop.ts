import { fileURLToPath } from 'node:url';
import type { MessagePort } from 'node:worker_threads';
import { createSupervisor } from '@troupe/supervisor';
import { Piscina } from 'piscina';
import { median, nowNs } from '../stats.js';
import { RAW_NEST_PORT } from '../workers/rawNestTask.js';
import { leaf, relay } from './scopeAgents.js';

const rawNestUrl = new URL('../workers/rawNestTask.js', import.meta.url);

/** µs per run of one- and two-hop chains, raw and through the product (samples interleaved). */
export interface NestedHopSamples {
  readonly raw1: number[];
  readonly raw2: number[];
  readonly troupe1: number[];
  readonly troupe2: number[];
}

/**
 * What nesting costs: a two-hop chain minus a one-hop chain, on two-thread
 * pools, for raw piscina (the worker asks the main thread over a port, the
 * main thread runs the leaf on the pool and answers) and for the product
 * (`relay` delegating to `leaf` with its `task` tool). The raw
 * difference is the platform's floor for a nested hop: two more thread
 * crossings and a round trip.
 */
export async function measureNestedHop(scope: unknown, budgetMs: number): Promise<NestedHopSamples> {
  const raw = new Piscina({
    filename: fileURLToPath(rawNestUrl),
    minThreads: 2,
    maxThreads: 2,
    idleTimeout: Number.POSITIVE_INFINITY,
  });
  const ports: MessagePort[] = [];
  raw.on('message', (message: unknown) => {
    const port = (message as Record<string, unknown> | null)?.[RAW_NEST_PORT] as MessagePort | undefined;
    if (port === undefined) return;
    ports.push(port);
    port.on('message', ({ id, scope: carried }: { id: number; scope: unknown }) => {
      void raw.run({ scope: carried, nest: false }).then((result: string) => port.postMessage({ id, result }));
    });
  });
  const supervisor = createSupervisor({ pool: { threads: 2 }, persistence: null });
  const samples: NestedHopSamples = { raw1: [], raw2: [], troupe1: [], troupe2: [] };
  const timed = async (run: () => Promise<unknown>): Promise<number> => {
    const start = nowNs();
    await run();
    return (nowNs() - start) / 1000;
  };
  try {
    await supervisor.pool.ready();
    const spawn = async (agent: typeof leaf): Promise<void> => {
      const outcome = await supervisor.spawn(agent, { scope, input: 'go' });
      if (outcome.status !== 'done') throw new Error(`nested hop: ${agent.name} ended ${outcome.status}`);
    };
    const rawNested = async (): Promise<void> => {
      const result = await raw.run({ scope, nest: true });
      if (result !== 'relayed:leaf') throw new Error(`raw nested hop answered ${String(result)}`);
    };
    // A third of the budget warms both pools up.
    const warmUntil = nowNs() + (budgetMs / 3) * 1e6;
    const until = nowNs() + budgetMs * 1e6;
    for (let i = 0; (nowNs() < until && i < 20_000) || samples.raw1.length < 10; i++) {
      const warming = nowNs() < warmUntil;
      const r1 = await timed(() => raw.run({ scope, nest: false }));
      const r2 = await timed(rawNested);
      const t1 = await timed(() => spawn(leaf));
      const t2 = await timed(() => spawn(relay));
      if (warming) continue;
      samples.raw1.push(r1);
      samples.raw2.push(r2);
      samples.troupe1.push(t1);
      samples.troupe2.push(t2);
    }
  } finally {
    for (const port of ports) port.close();
    await Promise.all([raw.close(), supervisor.close()]);
  }
  return samples;
}

/** Median two-hop run minus median one-hop run. */
export function nestedHopUs(one: readonly number[], two: readonly number[]): number {
  return median(two) - median(one);
}
