import { fileURLToPath } from 'node:url';
import { decodeSubagentResult, encodeSubagentTask } from '@troupe/core/internal';
import { WORKER_URL } from '@troupe/subagent';
import { createSupervisor } from '@troupe/supervisor';
import { CancellationTable } from '@troupe/supervisor/internal';
import { Piscina } from 'piscina';
import { nowNs } from '../stats.js';
import { leaf } from './scopeAgents.js';

const piscinaTaskUrl = new URL('../workers/piscinaTask.js', import.meta.url);

/** µs per one-hop run, layer by layer (samples interleaved, so every layer sees the same machine). */
export interface HopLayers {
  /** A raw piscina round trip carrying `{ scope }`. */
  readonly piscina: number[];
  /** piscina running the real subagent worker on a task encoded by hand: + the worker runtime. */
  readonly worker: number[];
  /** `supervisor.spawn`: + the supervisor thread's work (scope check, run tree, dispatch, slot, watchdog, result). */
  readonly supervisor: number[];
}

/**
 * Decompose a one-hop subagent run of `scope` into layers, each on its own
 * one-thread pool: raw piscina, + the worker runtime, + the supervisor. The
 * difference between two layers is what the upper one adds.
 */
export async function measureHopLayers(scope: unknown, budgetMs: number): Promise<HopLayers> {
  const table = new CancellationTable({ capacity: 16 });
  const raw = new Piscina({
    filename: fileURLToPath(piscinaTaskUrl),
    minThreads: 1,
    maxThreads: 1,
    idleTimeout: Number.POSITIVE_INFINITY,
  });
  const runtime = new Piscina({
    filename: fileURLToPath(WORKER_URL),
    minThreads: 1,
    maxThreads: 1,
    idleTimeout: Number.POSITIVE_INFINITY,
  });
  const supervisor = createSupervisor({ pool: { threads: 1 }, persistence: null, scopeBudgetBytes: 1 << 21 });
  const layers: HopLayers = { piscina: [], worker: [], supervisor: [] };
  // One thread: the first task hands it the cancellation buffer, as the supervisor's dispatch does.
  let buffer: SharedArrayBuffer | undefined = table.buffer;
  const rawTask = { scope };
  let n = 0;
  const runtimeRun = async (): Promise<void> => {
    const agentId = `layer-${++n}`;
    const slot = table.register(agentId);
    try {
      const result = decodeSubagentResult(
        await runtime.run(
          encodeSubagentTask({
            module: leaf.module as string,
            agent: leaf.name,
            agentId,
            slot: slot.index,
            generation: slot.generation,
            host: 0,
            scope,
            // The supervisor versions a sealed scope it sees again, and the worker keeps its
            // frozen copy: the same here, so this layer and the next differ only by the supervisor.
            scopeVersion: 1,
            input: 'go',
            capability: 'hand-encoded-capability0',
            buffer,
          }),
        ),
      );
      buffer = undefined;
      if (result.result?.end.status !== 'done')
        throw new Error(`hop layers: the worker answered ${result.error ?? 'not done'}`);
    } finally {
      table.release(agentId);
    }
  };
  const done = (outcome: { status: string }): void => {
    if (outcome.status !== 'done') throw new Error(`hop layers: a run ended ${outcome.status}`);
  };
  const steps: [keyof HopLayers, () => Promise<unknown>][] = [
    ['piscina', () => raw.run(rawTask)],
    ['worker', runtimeRun],
    ['supervisor', () => supervisor.spawn(leaf, { scope, input: 'go' }).then(done)],
  ];
  try {
    await supervisor.ready();
    // A third of the budget warms the four fresh workers up (each JIT-compiles on its own).
    const warmUntil = nowNs() + (budgetMs / 3) * 1e6;
    const until = nowNs() + budgetMs * 1e6;
    for (let i = 0; (nowNs() < until && i < 20_000) || layers.piscina.length < 20; i++) {
      const warming = nowNs() < warmUntil;
      for (const [layer, step] of steps) {
        const start = nowNs();
        await step();
        if (!warming) layers[layer].push((nowNs() - start) / 1000);
      }
    }
  } finally {
    await Promise.all([raw.close(), runtime.close(), supervisor.close()]);
  }
  return layers;
}
