import { BasicTracerProvider, BatchSpanProcessor, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import type { AgentId, ToolCallId } from '@troupe/core';
import { instrument } from '@troupe/otel';
import { createSupervisor, type Supervisor, systemClock } from '@troupe/supervisor';
import type { Figure, Suite, SuiteContext } from '../Suite.js';
import { median, nowNs, quantile, round, timeSync } from '../stats.js';
import { fanoutTrials } from './supervisor.js';

/** Takes every batch and keeps nothing: what is measured is the supervisor thread's side of a span. */
const discard: SpanExporter = {
  export: (_spans, done) => done({ code: 0 }),
  shutdown: () => Promise.resolve(),
};

/** A provider with the SDK's batch processor (queue large enough that no span is dropped). */
function batchedProvider(): BasicTracerProvider {
  return new BasicTracerProvider({
    spanProcessors: [new BatchSpanProcessor(discard, { maxQueueSize: 1 << 16, maxExportBatchSize: 512 })],
  });
}

/**
 * What an instrumented site costs when no bridge listens: the two things a
 * site does then — ask the supervisor's emitter whether anyone listens to its
 * event (the loop's and executor's sites; the run tree's own sites read a
 * cache in front of the same answer), and read the clock (the dispatch time
 * of a worker run, kept for its outcome event).
 */
async function siteOff(ctx: SuiteContext): Promise<Figure[]> {
  const supervisor = createSupervisor({ pool: { threads: 1 }, persistence: null });
  const options = ctx.quick ? { batches: 30, perBatch: 20_000 } : { batches: 200, perBatch: 50_000 };
  ctx.progress('otel: instrumented sites with no bridge');
  const guard = timeSync(() => supervisor.listenerCount('tool.execute.start') > 0, options);
  const clock = timeSync(() => systemClock.now(), options);
  await supervisor.destroy();
  const g = median(guard);
  const c = median(clock);
  return [
    {
      suite: 'otel',
      name: 'otel.site_off_ns',
      value: round(Math.max(g, c)),
      unit: 'ns',
      detail: {
        listener_check_ns: round(g),
        clock_read_ns: round(c),
        p95_ns: round(Math.max(quantile(guard, 0.95), quantile(clock, 0.95))),
        what: 'the dearer of the two things a site does with no bridge: is anyone listening, and one clock read (worker runs only)',
      },
    },
  ];
}

/**
 * The supervisor thread's cost per span with the bridge and the SDK's batch
 * processor: the events of one subagent run (spawned, two model calls around
 * one tool call, done — 4 spans) emitted on a real supervisor as the run
 * tree emits them, timed with the bridge installed minus the same emits with
 * nobody listening (measured first), per span. Blocks yield to the event
 * loop so the processor exports as it would in a daemon (the exporter
 * discards); the time of those exports is in the figure.
 */
async function spanCost(ctx: SuiteContext): Promise<Figure[]> {
  const supervisor = createSupervisor({ pool: { threads: 1 }, persistence: null });
  const provider = batchedProvider();
  const parent = 'agent_bench' as AgentId;
  const bytes = { scope: 60, toolContext: 3, metadata: 3, total: 66 };
  const usage = { inputTokens: 10, outputTokens: 5 };
  let n = 0;
  const oneRun = (): void => {
    const i = n++;
    const agentId = `${parent}-sub-${i}` as AgentId;
    const runId = `run_${i}`;
    const path = [parent, agentId];
    const toolCallId = 'call_0_0' as ToolCallId;
    let at = systemClock.now();
    const tick = (): number => {
      at += 0.01;
      return at;
    };
    const ids = { agentId, runId, path };
    const model = { ...ids, model: 'script-1', provider: 'bench' };
    supervisor.emit('subagent.spawned', {
      ...ids,
      parentAgentId: parent,
      agent: 'leaf',
      resumed: false,
      bytes,
      toolCallId: undefined,
      model: 'script-1',
      provider: 'bench',
      at,
    });
    supervisor.emit('model.start', { ...model, turn: 1, at: tick() });
    supervisor.emit('model.stop', {
      ...model,
      turn: 1,
      durationMs: 0.01,
      usage,
      responseModel: undefined,
      timeToFirstTokenMs: undefined,
      attempts: 1,
      finishReason: 'tool_calls',
      toolCalls: 1,
      at: tick(),
    } as never);
    const tool = { ...ids, toolName: 'work', toolCallId, attempt: 1 };
    supervisor.emit('tool.execute.start', { ...tool, at: tick() } as never);
    supervisor.emit('tool.execute.stop', {
      ...tool,
      durationMs: 0.01,
      status: 'ok',
      failure: undefined,
      approval: undefined,
      at: tick(),
    } as never);
    supervisor.emit('model.start', { ...model, turn: 2, at: tick() });
    supervisor.emit('model.stop', {
      ...model,
      turn: 2,
      durationMs: 0.01,
      usage,
      responseModel: undefined,
      timeToFirstTokenMs: undefined,
      attempts: 1,
      finishReason: 'stop',
      toolCalls: 0,
      at: tick(),
    } as never);
    supervisor.emit('subagent.done', {
      ...ids,
      parentAgentId: parent,
      usage,
      totalUsage: usage,
      threadId: 1,
      dispatchedAt: at,
      turns: 2,
      at: tick(),
    });
  };
  const perBlock = 250;
  const blocks = ctx.quick ? 20 : 100;
  const block = async (): Promise<number> => {
    const start = nowNs();
    for (let i = 0; i < perBlock; i++) oneRun();
    await new Promise<void>((resolve) => setImmediate(resolve));
    return (nowNs() - start) / perBlock;
  };
  const on: number[] = [];
  const off: number[] = [];
  try {
    // Off first, then on, each its own stretch: a traced block leaves garbage and queued exports
    // behind that an interleaved untraced block would be charged for.
    for (let i = 0; i < 10; i++) await block();
    for (let b = 0; b < blocks; b++) off.push(await block());
    const tracing = instrument(supervisor, { tracer: provider.getTracer('bench') });
    for (let i = 0; i < 10; i++) await block();
    for (let b = 0; b < blocks; b++) {
      if (b % 20 === 0) ctx.progress(`otel: span cost ${b}/${blocks}`);
      on.push(await block());
    }
    tracing.stop();
    await provider.forceFlush();
  } finally {
    await provider.shutdown();
    await supervisor.destroy();
  }
  const spansPerRun = 4;
  const perSpan = (median(on) - median(off)) / spansPerRun / 1000;
  return [
    {
      suite: 'otel',
      name: 'otel.span_us',
      value: round(perSpan),
      unit: 'µs',
      baseline: { name: 'the same events with nobody listening (µs per run)', value: round(median(off) / 1000) },
      detail: {
        run_us_traced: round(median(on) / 1000),
        run_p95_us_traced: round(quantile(on, 0.95) / 1000),
        spans_per_run: spansPerRun,
        runs: on.length * perBlock,
        what: 'bridge listeners + SDK span start/end + BatchSpanProcessor onEnd and export (exporter discards)',
      },
    },
  ];
}

/** The supervisor suite's fan-out (100 subagents in one turn) with tracing on, against piscina and untraced. */
async function fanout(ctx: SuiteContext): Promise<Figure[]> {
  const provider = batchedProvider();
  let traced: ReturnType<typeof instrument> | undefined;
  try {
    const { base, variants, trials } = await fanoutTrials(ctx, [
      () => {},
      (s: Supervisor) => {
        traced = instrument(s, { tracer: provider.getTracer('bench') });
      },
    ]);
    const b = median(base);
    const plain = median(variants[0] ?? []);
    const on = median(variants[1] ?? []);
    const spans = traced?.stats().spans ?? 0;
    return [
      {
        suite: 'otel',
        name: 'otel.fanout100_ratio',
        value: round(on / b),
        unit: 'x',
        baseline: { name: 'the same 100 subagent tasks straight on piscina (ms, median)', value: round(b) },
        ratio: round(on / b),
        detail: {
          traced_turn_ms: round(on),
          traced_p95_ms: round(quantile(variants[1] ?? [], 0.95)),
          untraced_turn_ms: round(plain),
          untraced_ratio: round(plain / b),
          spans_per_turn: round(spans / (trials + 10)),
          trials,
        },
      },
    ];
  } finally {
    traced?.stop();
    await provider.shutdown();
  }
}

/** What tracing costs: with no bridge, per span with one, and on the fan-out. */
export const otelSuite: Suite = {
  name: 'otel',
  description: 'tracing: an instrumented site with no bridge, a span with the bridge, the fan-out traced',
  placementSensitive: false,
  inDefaultRun: true,
  async run(ctx) {
    return [...(await siteOff(ctx)), ...(await spanCost(ctx)), ...(await fanout(ctx))];
  },
};
