// The demo's traces (`pnpm demo --trace`, or TROUPE_DEMO_TRACE=1): the
// supervisor's spans printed as a tree at the end; with
// OTEL_EXPORTER_OTLP_ENDPOINT set, exported over OTLP/HTTP (Jaeger, Tempo, an
// OpenTelemetry Collector...), and printed as well when --trace asks for it.
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { instrument, TroupeAttr } from '@troupe/otel';
import type { Supervisor } from '@troupe/supervisor';

/** What the demo asked for: its spans printed as a tree, exported over OTLP, or both. */
export interface TracingMode {
  readonly print: boolean;
  readonly export: boolean;
}

/** The tracing asked for, or undefined for none. */
export function tracingMode(): TracingMode | undefined {
  const exported = (process.env.OTEL_EXPORTER_OTLP_ENDPOINT ?? '') !== '';
  const print = process.argv.includes('--trace') || process.env.TROUPE_DEMO_TRACE === '1';
  return print || exported ? { print, export: exported } : undefined;
}

/** Trace `supervisor`; `finish()` flushes the exporter and prints the tree (as asked), and stops. */
export function startTracing(supervisor: Supervisor, mode: TracingMode) {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const memory = mode.print ? new InMemorySpanExporter() : undefined;
  const otlp = mode.export ? new OTLPTraceExporter() : undefined;
  const spanProcessors: (SimpleSpanProcessor | BatchSpanProcessor)[] = [];
  if (memory !== undefined) spanProcessors.push(new SimpleSpanProcessor(memory));
  if (otlp !== undefined) spanProcessors.push(new BatchSpanProcessor(otlp));
  const provider = new BasicTracerProvider({ spanProcessors });
  const tracer = provider.getTracer('troupe-demo');
  const tracing = instrument(supervisor, { tracer });
  return {
    /** Run `work` inside a span of its own (a scene), as a daemon's request handler would. */
    scene<T>(name: string, work: () => Promise<T>): Promise<T> {
      return tracer.startActiveSpan(name, async (span) => {
        try {
          return await work();
        } finally {
          span.end();
        }
      });
    },
    async finish(out: (line: string) => void): Promise<void> {
      tracing.stop();
      await provider.forceFlush();
      if (otlp !== undefined) {
        out(`\n${tracing.stats().spans} spans exported to ${process.env.OTEL_EXPORTER_OTLP_ENDPOINT}`);
      }
      if (memory !== undefined) {
        out('\nTrace (one tree per scene; ms from the scene start):');
        for (const line of renderTrace(memory.getFinishedSpans())) out(`   ${line}`);
      }
      await provider.shutdown();
      trace.disable();
    },
  };
}

const msOf = (t: readonly [number, number]): number => t[0] * 1000 + t[1] / 1e6;

/** Spans as indented lines, children in start order: `name  outcome  +start ms  duration ms`. */
export function renderTrace(spans: readonly ReadableSpan[]): string[] {
  const ids = new Set(spans.map((s) => s.spanContext().spanId));
  const children = new Map<string | undefined, ReadableSpan[]>();
  for (const span of spans) {
    const parent = span.parentSpanContext?.spanId;
    const key = parent !== undefined && ids.has(parent) ? parent : undefined;
    children.set(key, [...(children.get(key) ?? []), span]);
  }
  const lines: string[] = [];
  const walk = (key: string | undefined, depth: number, origin: number | undefined): void => {
    const sorted = [...(children.get(key) ?? [])].sort((a, b) => msOf(a.startTime) - msOf(b.startTime));
    for (const span of sorted) {
      const start = msOf(span.startTime);
      const zero = origin ?? start;
      const outcome = span.attributes[TroupeAttr.runStatus] ?? span.attributes[TroupeAttr.toolStatus];
      const thread = span.attributes['thread.id'];
      lines.push(
        `${'  '.repeat(depth)}${span.name}${outcome === undefined ? '' : ` [${String(outcome)}]`}` +
          `${thread === undefined ? '' : ` thread ${String(thread)}`}` +
          `  +${(start - zero).toFixed(1)} ms, ${(msOf(span.endTime) - start).toFixed(1)} ms`,
      );
      walk(span.spanContext().spanId, depth + 1, zero);
    }
  };
  walk(undefined, 0, undefined);
  return lines;
}
