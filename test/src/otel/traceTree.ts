// The tracing tests' harness: a tracer provider exporting to memory, the
// global AsyncLocalStorage context manager, and a renderer of the span tree.
import { context } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { TroupeAttr } from '@troupe/otel';

let contextManager: AsyncLocalStorageContextManager | undefined;

/** Register the AsyncLocalStorage context manager once for the process (what the Node SDK does). */
export function useAsyncContext(): void {
  if (contextManager !== undefined) return;
  contextManager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(contextManager);
}

/** A provider whose spans land in memory as each ends. */
export function memoryTracing(processor?: (exporter: InMemorySpanExporter) => SpanProcessor) {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    spanProcessors: [processor === undefined ? new SimpleSpanProcessor(exporter) : processor(exporter)],
  });
  return { exporter, provider, tracer: provider.getTracer('troupe-test') };
}

const outcomeOf = (span: ReadableSpan): string | undefined =>
  (span.attributes[TroupeAttr.runStatus] ?? span.attributes[TroupeAttr.toolStatus]) as string | undefined;

/**
 * The tree of `spans` as indented lines, `name (outcome)`, children sorted
 * by name then start (siblings of a fan-out run in any order). Spans whose
 * parent is not among them are roots.
 */
export function renderTree(spans: readonly ReadableSpan[]): string {
  const ids = new Set(spans.map((s) => s.spanContext().spanId));
  const children = new Map<string | undefined, ReadableSpan[]>();
  for (const span of spans) {
    const parent = span.parentSpanContext?.spanId;
    const key = parent !== undefined && ids.has(parent) ? parent : undefined;
    children.set(key, [...(children.get(key) ?? []), span]);
  }
  const order = (a: ReadableSpan, b: ReadableSpan): number =>
    a.name.localeCompare(b.name) ||
    a.startTime[0] - b.startTime[0] ||
    a.startTime[1] - b.startTime[1] ||
    (outcomeOf(a) ?? '').localeCompare(outcomeOf(b) ?? '');
  const lines: string[] = [];
  const walk = (key: string | undefined, depth: number): void => {
    for (const span of [...(children.get(key) ?? [])].sort(order)) {
      const outcome = outcomeOf(span);
      lines.push(`${'  '.repeat(depth)}${span.name}${outcome === undefined ? '' : ` (${outcome})`}`);
      walk(span.spanContext().spanId, depth + 1);
    }
  };
  walk(undefined, 0);
  return lines.join('\n');
}

/** The one span named `name` whose attributes include `where`. */
export function only(spans: readonly ReadableSpan[], name: string, where: Record<string, unknown> = {}): ReadableSpan {
  const found = spans.filter((s) => s.name === name && Object.entries(where).every(([k, v]) => s.attributes[k] === v));
  if (found.length !== 1) throw new Error(`expected one span ${name} ${JSON.stringify(where)}, found ${found.length}`);
  return found[0] as ReadableSpan;
}

/** Milliseconds of an HrTime. */
export const ms = (t: readonly [number, number]): number => t[0] * 1000 + t[1] / 1e6;
