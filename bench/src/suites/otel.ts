import { deserialize, serialize } from 'node:v8';
import { context, trace } from '@opentelemetry/api';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-base';
import type { AgentId } from '@troupe/core';
import { instrument } from '@troupe/otel';
import { createSupervisor, type Supervisor, systemClock } from '@troupe/supervisor';
import type { Figure, SuiteBody, SuiteContext } from '../Suite.js';
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

/** One run's worker telemetry as the worker batches it (`['t', name, payload]`), in the order a run sends it. */
function workerBatch(at: number): [string, string, Record<string, unknown>][] {
  const usage = { inputTokens: 10, outputTokens: 5 };
  const model = (turn: number, t: number) => ({ model: 'script-1', provider: 'bench', turn, at: t });
  const stop = (turn: number, t: number, finishReason: string, toolCalls: number) => ({
    model: 'script-1',
    provider: 'bench',
    turn,
    durationMs: 0.01,
    usage,
    attempts: 1,
    finishReason,
    toolCalls,
    at: t,
  });
  const tool = { toolName: 'work', toolCallId: 'call_0_0', attempt: 1 };
  return [
    ['t', 'model.start', model(1, at + 0.01)],
    ['t', 'model.stop', stop(1, at + 0.02, 'tool_calls', 1)],
    ['t', 'tool.execute.start', { toolName: tool.toolName, toolCallId: tool.toolCallId, attempt: 1, at: at + 0.03 }],
    [
      't',
      'tool.execute.stop',
      {
        toolName: tool.toolName,
        toolCallId: tool.toolCallId,
        attempt: 1,
        durationMs: 0.01,
        status: 'ok',
        at: at + 0.04,
      },
    ],
    ['t', 'model.start', model(2, at + 0.05)],
    ['t', 'model.stop', stop(2, at + 0.06, 'stop', 0)],
  ];
}

/**
 * The supervisor thread's cost per span with the bridge and the SDK's batch
 * processor, for the events of one subagent run (spawned, two model calls
 * around one tool call, done — 4 spans), made the way the run tree makes
 * them: the spawn and the end as literals, only when someone listens; the
 * worker's telemetry decoded from the bytes a worker posts (`v8.deserialize`,
 * the receiving half of `postMessage`) and re-emitted with the run's ids,
 * only when someone listens (with nobody listening a worker sends none).
 * Timed with the bridge installed minus the same run with nobody listening
 * (measured first), per span. Beside it, the floor: the same spans, with the
 * attributes the bridge gave them, made straight on the tracer. Blocks yield
 * to the event loop so the processor exports as it would in a daemon (the
 * exporter discards); the time of those exports is in both.
 */
async function spanCost(ctx: SuiteContext): Promise<Figure[]> {
  const supervisor = createSupervisor({ pool: { threads: 1 }, persistence: null });
  const provider = batchedProvider();
  const floorProvider = batchedProvider();
  const parent = 'agent_bench' as AgentId;
  const bytes = { scope: 60, toolContext: 3, metadata: 3, total: 66 };
  const usage = { inputTokens: 10, outputTokens: 5 };
  const posted = serialize(workerBatch(systemClock.now()));
  const events = supervisor as unknown as { emit(name: string, payload: unknown): boolean };
  let n = 0;
  const oneRun = (): void => {
    const i = n++;
    const agentId = `${parent}-sub-${i}` as AgentId;
    const runId = `run_${i}`;
    const path = [parent, agentId];
    const at = systemClock.now();
    if (supervisor.listenerCount('subagent.spawned') > 0) {
      supervisor.emit('subagent.spawned', {
        agentId,
        runId,
        parentAgentId: parent,
        agent: 'leaf',
        resumed: false,
        path,
        bytes,
        toolCallId: undefined,
        model: 'script-1',
        provider: 'bench',
        at,
      });
    }
    if (supervisor.listenerCount('model.start') > 0) {
      const batch = deserialize(posted) as [string, string, Record<string, unknown>][];
      for (const [, name, raw] of batch) {
        if (supervisor.listenerCount(name as 'model.start') === 0) continue;
        // As RunTree#telemetry builds it: the run's ids before the spread, and set again after it.
        const payload: Record<string, unknown> = { agentId, runId, path, ...raw };
        payload.agentId = agentId;
        payload.runId = runId;
        payload.path = path;
        events.emit(name, payload);
      }
    }
    if (supervisor.listenerCount('subagent.done') > 0) {
      supervisor.emit('subagent.done', {
        agentId,
        runId,
        path,
        parentAgentId: parent,
        usage,
        totalUsage: usage,
        threadId: 1,
        dispatchedAt: at,
        turns: 2,
        at: at + 0.07,
      });
    }
  };
  const perBlock = 250;
  const blocks = ctx.quick ? 20 : 100;
  const block = async (run: () => void): Promise<number> => {
    const start = nowNs();
    for (let i = 0; i < perBlock; i++) run();
    await new Promise<void>((resolve) => setImmediate(resolve));
    return (nowNs() - start) / perBlock;
  };
  const on: number[] = [];
  const off: number[] = [];
  const floor: number[] = [];
  const spansPerRun = 4;
  try {
    // Off first, then on, each its own stretch: a traced block leaves garbage and queued exports
    // behind that an interleaved untraced block would be charged for.
    for (let i = 0; i < 10; i++) await block(oneRun);
    for (let b = 0; b < blocks; b++) off.push(await block(oneRun));
    // The spans one traced run makes, as the floor replays them.
    const sample = new InMemorySpanExporter();
    const sampleProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(sample)] });
    const sampling = instrument(supervisor, { tracer: sampleProvider.getTracer('bench') });
    oneRun();
    sampling.stop();
    const spans = sample.getFinishedSpans().map((s) => ({
      name: s.name,
      kind: s.kind,
      attributes: { ...s.attributes },
      parent: s.parentSpanContext !== undefined,
    }));
    await sampleProvider.shutdown();
    if (spans.length !== spansPerRun) {
      throw new Error(`otel: one run made ${spans.length} spans, expected ${spansPerRun}`);
    }
    const root = spans.find((s) => !s.parent);
    if (root === undefined) throw new Error('otel: one run made no span without a parent (its invoke_agent span)');
    const tracer = floorProvider.getTracer('floor');
    const floorRun = (): void => {
      const at = systemClock.now();
      const rootSpan = tracer.startSpan(root.name, {
        kind: root.kind,
        startTime: epochHr(at),
        attributes: root.attributes,
      });
      const inRun = trace.setSpan(context.active(), rootSpan);
      for (const s of spans) {
        if (s === root) continue;
        tracer
          .startSpan(s.name, { kind: s.kind, startTime: epochHr(at), attributes: s.attributes }, inRun)
          .end(epochHr(at + 0.01));
      }
      rootSpan.end(epochHr(at + 0.07));
    };
    // The floor in its own stretch too (interleaved with traced blocks, each was charged the
    // other's garbage: the difference swung from −0.03 to +4.5 µs a span between runs).
    for (let i = 0; i < 10; i++) await block(floorRun);
    for (let b = 0; b < blocks; b++) floor.push(await block(floorRun));
    const tracing = instrument(supervisor, { tracer: provider.getTracer('bench') });
    for (let i = 0; i < 10; i++) await block(oneRun);
    for (let b = 0; b < blocks; b++) {
      if (b % 20 === 0) ctx.progress(`otel: span cost ${b}/${blocks}`);
      on.push(await block(oneRun));
    }
    tracing.stop();
    await provider.forceFlush();
  } finally {
    await provider.shutdown();
    await floorProvider.shutdown();
    await supervisor.destroy();
  }
  // The decode alone (an upper bound of the receiving side: v8.deserialize makes a JS deserializer
  // each call; a port's native receipt of this batch measured 4.5–4.7 µs of main-thread CPU).
  const decode = median(timeSync(() => deserialize(posted), { batches: ctx.quick ? 20 : 60, perBatch: 2_000 }));
  const perSpan = (median(on) - median(off)) / spansPerRun / 1000;
  const floorPerSpan = median(floor) / spansPerRun / 1000;
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
        sdk_floor_us_per_span: round(floorPerSpan),
        over_floor_us_per_span: round(perSpan - floorPerSpan),
        telemetry_decode_us_per_run: round(decode / 1000),
        spans_per_run: spansPerRun,
        runs: on.length * perBlock,
        what: 'telemetry decode + payloads + bridge listeners + SDK span start/end + BatchSpanProcessor onEnd and export (exporter discards); the floor: the same spans and attributes straight on the tracer',
      },
    },
  ];
}

/** Milliseconds since the epoch as an `HrTime` (the bridge's conversion). */
function epochHr(ms: number): [number, number] {
  const seconds = Math.floor(ms / 1000);
  return [seconds, Math.round((ms - seconds * 1000) * 1e6)];
}

/** The supervisor suite's fan-out (100 subagents in one turn) with tracing on, against piscina and untraced. */
async function fanout(ctx: SuiteContext): Promise<Figure[]> {
  const provider = batchedProvider();
  let traced: ReturnType<typeof instrument> | undefined;
  try {
    const { base, variants, trials, warmup } = await fanoutTrials(ctx, [
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
          spans_per_turn: round(spans / (trials + warmup)),
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
export const otelSuite: SuiteBody = {
  async run(ctx) {
    return [...(await siteOff(ctx)), ...(await spanCost(ctx)), ...(await fanout(ctx))];
  },
};
