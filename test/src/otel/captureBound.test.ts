// Issue 31, item 3: content capture kept every streamed tool call a model opened, each with its
// whole id: a stream of tool-call deltas, each with a new index and a 4 KiB id, grew the
// supervisor's heap by 160–220 MB in 3 s under `captureContent: { maxLength: 256 }`. What capture
// keeps is bounded: at most MAX_CAPTURED_TOOL_CALLS calls per model call, every string cut.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { GenAi, instrument } from '@troupe/otel';
import { createSupervisor, type Supervisor } from '@troupe/supervisor';
import { FLOOD_CALLS, flood, LONG_ID, longIds } from './floodAgents.js';
import { memoryTracing, only } from './traceTree.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

function heapAfterGc(): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

const MiB = 1024 * 1024;

describe('@troupe/otel: content capture is bounded whatever the model streams', () => {
  let supervisor: Supervisor;
  before(async () => {
    supervisor = createSupervisor({ pool: { threads: 1 } });
    await supervisor.pool.ready();
  });
  after(() => supervisor.destroy());

  /**
   * Run the flooding model until every delta it streamed reached the supervisor, then measure
   * the heap it holds (after a collection) while the model call is still open; cancel it.
   */
  async function heldDuringFlood(): Promise<number> {
    const before = heapAfterGc();
    let seen = 0;
    let flooded!: () => void;
    const done = new Promise<void>((resolve) => {
      flooded = resolve;
    });
    const onDeltas = (e: { deltas: readonly { type: string }[] }) => {
      for (const d of e.deltas) if (d.type === 'tool_call') seen++;
      if (seen === FLOOD_CALLS) flooded();
    };
    supervisor.on('model.delta', onDeltas);
    const abort = new AbortController();
    const outcome = supervisor.spawn(flood, { input: 'go', scope: {}, signal: abort.signal }).catch((e) => e);
    try {
      await Promise.race([
        done,
        outcome.then((o) => {
          throw new Error(`the flood ended before its deltas all arrived (${seen}): ${JSON.stringify(o)}`);
        }),
      ]);
      return heapAfterGc() - before;
    } finally {
      supervisor.off('model.delta', onDeltas);
      abort.abort();
      await outcome;
    }
  }

  it(`${FLOOD_CALLS} tool-call deltas, each a new index with a 4 KiB id: the heap held is what it is without tracing`, async () => {
    await heldDuringFlood(); // warm: the code paths compiled, the pool's buffers grown
    const bare = await heldDuringFlood();
    const { tracer } = memoryTracing();
    const tracing = instrument(supervisor, { tracer, captureContent: { maxLength: 256 } });
    let traced: number;
    try {
      traced = await heldDuringFlood();
    } finally {
      tracing.stop();
    }
    // Unbounded, capture held every id and its arguments: 10,000 × ~4.4 KB ≈ 44 MB over the bare run.
    assert.ok(
      traced - bare < 8 * MiB,
      `content capture held ${((traced - bare) / MiB).toFixed(1)} MiB more than no tracing (${(bare / MiB).toFixed(1)} MiB)`,
    );
  });

  it('a call whose id is longer than maxLength still gets its streamed arguments, cut', async () => {
    const { exporter, tracer } = memoryTracing();
    const tracing = instrument(supervisor, { tracer, captureContent: { maxLength: 64 } });
    try {
      const outcome = await supervisor.spawn(longIds, { input: 'go', scope: {} });
      assert.equal(outcome.status, 'done');
    } finally {
      tracing.stop();
    }
    const span = only(exporter.getFinishedSpans(), 'execute_tool work');
    assert.equal(span.attributes[GenAi.toolCallId], LONG_ID);
    assert.equal(span.attributes[GenAi.toolCallArguments], `{"item":"${'w'.repeat(55)}…`);
  });
});
