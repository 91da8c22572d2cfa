// An exporter that fails or is slow never blocks a run or stops later exports.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  type ReadableSpan,
  SimpleSpanProcessor,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-base';
import { instrument } from '@troupe/otel';
import { createSupervisor, type Supervisor } from '@troupe/supervisor';
import { leaf } from './agents.js';

type ExportResult = Parameters<Parameters<SpanExporter['export']>[1]>[0];
// ExportResultCode of @opentelemetry/core.
const SUCCESS = 0;
const FAILED = 1;

const scope = Object.freeze({ userId: 'u1', orgId: 'o1', role: 'admin' });

/**
 * An exporter whose first export throws, second fails, third hangs until
 * `release()`; the rest succeed. Every span it was handed is kept, by call.
 */
class TroubledExporter implements SpanExporter {
  readonly calls: ReadableSpan[][] = [];
  #release: (() => void) | undefined;
  readonly hanging: Promise<void>;
  #hung: () => void = () => {};
  constructor() {
    this.hanging = new Promise((resolve) => {
      this.#hung = resolve;
    });
  }
  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.calls.push(spans);
    switch (this.calls.length) {
      case 1:
        throw new Error('the collector is down');
      case 2:
        done({ code: FAILED, error: new Error('503') });
        return;
      case 3:
        this.#release = () => done({ code: SUCCESS });
        this.#hung();
        return;
      default:
        done({ code: SUCCESS });
    }
  }
  release(): void {
    this.#release?.();
  }
  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

const runIds = (spans: readonly ReadableSpan[]): Set<unknown> =>
  new Set(spans.filter((s) => s.name === 'invoke_agent leaf').map((s) => s.attributes['troupe.run.id']));

describe('@troupe/otel: exporters that fail', () => {
  let supervisor: Supervisor;
  before(async () => {
    supervisor = createSupervisor({ pool: { threads: 2 } });
    await supervisor.pool.ready();
  });
  after(() => supervisor.destroy());

  it('batched: a throwing, a failing and a hanging export block no run, and the exports after them go out', async () => {
    const exporter = new TroubledExporter();
    // Exports happen when the test flushes, never on a timer. The export timeout bounds only the
    // hang below (two runs, released at once), but also how long this file's process lives: the
    // SDK does not clear an export's timeout timer when the exporter throws (the first export
    // here), and that timer holds the event loop open until it fires.
    const processor = new BatchSpanProcessor(exporter, {
      scheduledDelayMillis: 3_600_000,
      exportTimeoutMillis: 5_000,
    });
    const provider = new BasicTracerProvider({ spanProcessors: [processor] });
    const tracing = instrument(supervisor, { tracer: provider.getTracer('troubled') });
    const spawnOne = async (): Promise<string> => {
      const outcome = await supervisor.spawn(leaf, { input: 'go', scope });
      assert.equal(outcome.status, 'done');
      return outcome.runId;
    };
    try {
      const first = await spawnOne();
      await provider.forceFlush().catch(() => {}); // throws inside the exporter
      const second = await spawnOne();
      await provider.forceFlush().catch(() => {}); // reports FAILED
      const third = await spawnOne();
      const flushing = provider.forceFlush();
      await exporter.hanging; // the third export is in flight and does not come back
      // Runs go on while it hangs: their spans wait in the processor's queue.
      const later = [await spawnOne(), await spawnOne()];
      exporter.release();
      await flushing;
      await provider.forceFlush();
      assert.deepEqual([...runIds(exporter.calls[0] ?? [])], [first]);
      assert.deepEqual([...runIds(exporter.calls[1] ?? [])], [second]);
      assert.deepEqual([...runIds(exporter.calls[2] ?? [])], [third]);
      assert.deepEqual(
        [...runIds(exporter.calls.slice(3).flat())].sort(),
        [...later].sort(),
        'the spans of the runs made during the hang were exported after it',
      );
      assert.equal(tracing.stats().errors, 0, 'the batch processor kept every exporter failure away from the bridge');
    } finally {
      tracing.stop();
      await provider.shutdown();
    }
  });

  it('unbatched: an exporter that throws on span end is caught at the bridge; the run ends as it would', async () => {
    const errors: unknown[] = [];
    const throwing: SpanExporter = {
      export: () => {
        throw new Error('export failed synchronously');
      },
      shutdown: () => Promise.resolve(),
    };
    // A processor that calls the exporter on span end, on the supervisor thread.
    const provider = new BasicTracerProvider({
      spanProcessors: [
        new SimpleSpanProcessor(throwing),
        {
          onStart: () => {},
          onEnd: () => {
            throw new Error('a processor that throws');
          },
          forceFlush: () => Promise.resolve(),
          shutdown: () => Promise.resolve(),
        },
      ],
    });
    const tracing = instrument(supervisor, { tracer: provider.getTracer('throwing'), onError: (e) => errors.push(e) });
    try {
      const outcome = await supervisor.spawn(leaf, { input: 'go', scope });
      assert.equal(outcome.status, 'done');
      assert.equal(outcome.status === 'done' && outcome.result, 'leaf done');
      const agent = await supervisor.startAgent(leaf, { scope });
      assert.equal((await agent.send('go')).status, 'done');
      await supervisor.stopAgent(agent.id);
      assert.ok(tracing.stats().errors > 0 && errors.length === tracing.stats().errors);
      assert.equal(tracing.stats().open, 0, 'no span was left open by a failed end');
    } finally {
      tracing.stop();
    }
  });
});
