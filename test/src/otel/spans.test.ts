// @troupe/otel against real worker threads: the span tree of each kind of
// run, read back from the SDK's in-memory exporter.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type Attributes, type Link, SpanStatusCode, trace } from '@opentelemetry/api';
import type { ReadableSpan, Sampler, SamplingResult } from '@opentelemetry/sdk-trace-base';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { GenAi, instrument, TroupeAttr, TroupeEvent } from '@troupe/otel';
import { createSupervisor, type Supervisor, type SupervisorEvents } from '@troupe/supervisor';
import { askParent, crashParent, fanout, leaf, nested, pollParent, timeouts } from './agents.js';
import { memoryTracing, ms, only, renderTree, useAsyncContext } from './traceTree.js';

const scope = Object.freeze({ userId: 'u1', orgId: 'o1', role: 'admin' });

function next<K extends keyof SupervisorEvents>(
  supervisor: Supervisor,
  name: K,
  filter: (payload: SupervisorEvents[K][0]) => boolean,
): Promise<SupervisorEvents[K][0]> {
  return new Promise((resolve) => {
    const listener = (payload: SupervisorEvents[K][0]): void => {
      if (!filter(payload)) return;
      supervisor.off(name as keyof SupervisorEvents, listener as never);
      resolve(payload);
    };
    supervisor.on(name as keyof SupervisorEvents, listener as never);
  });
}

/** The subtree of a leaf run: two model calls around one tool call. */
const leafTree = (depth: number, outcome = 'done'): string[] =>
  [`invoke_agent leaf (${outcome})`, '  chat script-1', '  chat script-1', '  execute_tool work (ok)'].map(
    (line) => `${'  '.repeat(depth)}${line}`,
  );

const within = (inner: ReadableSpan, outer: ReadableSpan): boolean =>
  ms(inner.startTime) >= ms(outer.startTime) && ms(inner.endTime) <= ms(outer.endTime);

describe('@troupe/otel: spans of a supervisor', () => {
  let supervisor: Supervisor;
  before(async () => {
    useAsyncContext();
    supervisor = createSupervisor({ pool: { threads: 2, graceMs: 200 } });
    await supervisor.pool.ready();
  });
  after(() => supervisor.destroy());

  it('a fan-out: the parent message, its task calls, one subagent under each, their tool and model calls', async () => {
    const { exporter, tracer } = memoryTracing();
    const tracing = instrument(supervisor, { tracer });
    try {
      const agent = await supervisor.startAgent(fanout, { scope, conversationId: 'conv-fan' });
      const reply = await agent.send('go');
      assert.equal(reply.status, 'done');
      const spans = exporter.getFinishedSpans();
      assert.equal(
        renderTree(spans),
        [
          'invoke_agent fanout (done)',
          '  chat script-1',
          '  chat script-1',
          ...[1, 2, 3].flatMap(() => ['  execute_tool task (ok)', ...leafTree(2)]),
        ].join('\n'),
      );
      const root = only(spans, 'invoke_agent fanout');
      const traceId = root.spanContext().traceId;
      assert.ok(
        spans.every((s) => s.spanContext().traceId === traceId),
        'one trace',
      );
      assert.deepEqual(
        {
          op: root.attributes[GenAi.operationName],
          name: root.attributes[GenAi.agentName],
          id: root.attributes[GenAi.agentId],
          conversation: root.attributes[GenAi.conversationId],
          provider: root.attributes[GenAi.providerName],
          model: root.attributes[GenAi.requestModel],
          kind: root.attributes[TroupeAttr.runKind],
          thread: root.attributes[GenAi.threadId],
          input: root.attributes[GenAi.usageInputTokens],
          totalInput: root.attributes[TroupeAttr.totalInputTokens],
        },
        {
          op: 'invoke_agent',
          name: 'fanout',
          id: agent.id,
          conversation: 'conv-fan',
          provider: 'troupe-test',
          model: 'script-1',
          kind: 'message',
          thread: 0,
          input: 22,
          totalInput: 22 + 3 * 22,
        },
      );
      const children = spans.filter((s) => s.name === 'invoke_agent leaf');
      for (const child of children) {
        const task = spans.find((s) => s.spanContext().spanId === child.parentSpanContext?.spanId) as ReadableSpan;
        assert.equal(task.name, 'execute_tool task');
        assert.equal(child.attributes[TroupeAttr.runKind], 'subagent');
        assert.equal(child.attributes[TroupeAttr.parentAgentId], agent.id);
        assert.equal(child.attributes[GenAi.conversationId], 'conv-fan');
        assert.ok((child.attributes[GenAi.threadId] as number) > 0, 'a worker thread');
        assert.ok((child.attributes[TroupeAttr.queueWaitMs] as number) >= 0, 'its queue wait');
        assert.ok((child.attributes[TroupeAttr.scopeBytes] as number) > 0, 'what its scope copied');
        assert.equal(
          child.attributes[TroupeAttr.channelBytes],
          (child.attributes[TroupeAttr.scopeBytes] as number) +
            (child.attributes[TroupeAttr.toolContextBytes] as number) +
            (child.attributes[TroupeAttr.metadataBytes] as number),
        );
        assert.match(String(task.attributes[GenAi.toolCallId]), /^call_0_[012]$/);
        assert.ok(within(child, task) && within(task, root), 'a child runs within its task call, within the message');
      }
      const chat = spans.find(
        (s) => s.name === 'chat script-1' && s.parentSpanContext?.spanId === children[0]?.spanContext().spanId,
      ) as ReadableSpan;
      assert.deepEqual(
        [
          GenAi.operationName,
          GenAi.providerName,
          GenAi.requestModel,
          GenAi.usageInputTokens,
          GenAi.usageOutputTokens,
          GenAi.usageCacheReadInputTokens,
          GenAi.usageReasoningOutputTokens,
        ].map((k) => chat.attributes[k]),
        ['chat', 'troupe-test', 'script-1', 11, 7, 3, 2],
      );
      const work = spans.find(
        (s) => s.name === 'execute_tool work' && s.parentSpanContext?.spanId === children[0]?.spanContext().spanId,
      ) as ReadableSpan;
      assert.deepEqual(
        [GenAi.toolName, GenAi.toolCallId, TroupeAttr.toolAttempts].map((k) => work.attributes[k]),
        ['work', 'call_0_0', 1],
      );
      // The worker measured the tool call: it lies within its run's span, after the first model call.
      assert.ok(within(work, children[0] as ReadableSpan));
      assert.equal(tracing.stats().open, 0);
      await supervisor.stopAgent(agent.id);
    } finally {
      tracing.stop();
    }
  });

  it('a nested delegation: parent → middle → leaf, each under the task call that spawned it', async () => {
    const { exporter, tracer } = memoryTracing();
    const tracing = instrument(supervisor, { tracer });
    try {
      const agent = await supervisor.startAgent(nested, { scope });
      assert.equal((await agent.send('go')).status, 'done');
      assert.equal(
        renderTree(exporter.getFinishedSpans()),
        [
          'invoke_agent nested (done)',
          '  chat script-1',
          '  chat script-1',
          '  execute_tool task (ok)',
          '    invoke_agent middle (done)',
          '      chat script-1',
          '      chat script-1',
          '      execute_tool task (ok)',
          ...leafTree(4),
        ].join('\n'),
      );
      const deep = only(exporter.getFinishedSpans(), 'invoke_agent leaf');
      assert.equal(deep.attributes[TroupeAttr.parentAgentId], `${agent.id}-sub-1`);
      assert.equal(deep.attributes[GenAi.agentId], `${agent.id}-sub-1-sub-1`);
      await supervisor.stopAgent(agent.id);
    } finally {
      tracing.stop();
    }
  });

  it('a cancel: every span of the tree ends with the reason in its status', async () => {
    const { exporter, tracer } = memoryTracing();
    const tracing = instrument(supervisor, { tracer });
    try {
      const agent = await supervisor.startAgent(pollParent, { scope });
      const polling = next(supervisor, 'tool.execute.start', (e) => e.toolName === 'poll');
      const replied = agent.send('go');
      await polling;
      assert.equal(agent.cancel('user'), true);
      const reply = await replied;
      assert.equal(reply.status, 'cancelled');
      const spans = exporter.getFinishedSpans();
      assert.equal(
        renderTree(spans),
        [
          'invoke_agent pollParent (cancelled)',
          '  chat script-1',
          '  execute_tool task (cancelled)',
          '    invoke_agent poller (cancelled)',
          '      chat script-1',
          '      execute_tool poll (cancelled)',
        ].join('\n'),
      );
      const root = only(spans, 'invoke_agent pollParent');
      const child = only(spans, 'invoke_agent poller');
      assert.deepEqual(root.status, { code: SpanStatusCode.ERROR, message: 'cancelled (user)' });
      assert.deepEqual(child.status, { code: SpanStatusCode.ERROR, message: 'cancelled (parent)' });
      assert.equal(child.attributes[TroupeAttr.cancelReason], 'parent');
      assert.equal(child.attributes[TroupeAttr.cancelForced], false);
      assert.equal(only(spans, 'execute_tool poll').status.code, SpanStatusCode.ERROR);
      assert.equal(tracing.stats().open, 0);
      await supervisor.stopAgent(agent.id);
    } finally {
      tracing.stop();
    }
  });

  it('a direct spawn with a retried tool and a tool timeout: attempts, events and outcomes on each call', async () => {
    const { exporter, tracer } = memoryTracing();
    const tracing = instrument(supervisor, { tracer });
    try {
      const outcome = await supervisor.spawn(timeouts, { input: 'go', scope });
      assert.equal(outcome.status, 'done');
      const spans = exporter.getFinishedSpans();
      assert.equal(
        renderTree(spans),
        [
          'invoke_agent timeouts (done)',
          '  chat script-1',
          '  chat script-1',
          '  execute_tool flaky (ok)',
          '  execute_tool slow (timeout)',
        ].join('\n'),
      );
      assert.equal(only(spans, 'invoke_agent timeouts').attributes[TroupeAttr.runKind], 'spawn');
      const flaky = only(spans, 'execute_tool flaky');
      assert.equal(flaky.attributes[TroupeAttr.toolAttempts], 2);
      assert.deepEqual(
        flaky.events.map((e) => [e.name, e.attributes?.[GenAi.errorType], e.attributes?.[TroupeAttr.toolWillRetry]]),
        [
          [TroupeEvent.toolAttemptFailed, 'E_FLAKY', true],
          [TroupeEvent.toolAttempt, undefined, undefined],
        ],
      );
      assert.equal(flaky.status.code, SpanStatusCode.UNSET);
      const slow = only(spans, 'execute_tool slow');
      assert.deepEqual(
        [TroupeAttr.toolStatus, TroupeAttr.toolFailure, TroupeAttr.toolTimeoutMs, GenAi.errorType].map(
          (k) => slow.attributes[k],
        ),
        ['timeout', 'timeout', 30, 'timeout'],
      );
      assert.equal(slow.status.code, SpanStatusCode.ERROR);
      assert.deepEqual(
        slow.events.map((e) => [e.name, e.attributes?.[TroupeAttr.toolFailure]]),
        [
          [TroupeEvent.toolTimeout, undefined],
          [TroupeEvent.toolAttemptFailed, 'timeout'],
        ],
      );
      assert.ok(ms(slow.endTime) - ms(slow.startTime) >= 30, 'the call lasted its timeout (as the worker measured)');
    } finally {
      tracing.stop();
    }
  });

  it('a worker crash: the crashed run and its interrupted tool call say so; the sibling and the parent go on', async () => {
    const { exporter, tracer } = memoryTracing();
    const tracing = instrument(supervisor, { tracer });
    try {
      const agent = await supervisor.startAgent(crashParent, { scope });
      const reply = await agent.send('go');
      assert.equal(reply.status, 'done');
      const spans = exporter.getFinishedSpans();
      assert.equal(
        renderTree(spans),
        [
          'invoke_agent crashParent (done)',
          '  chat script-1',
          '  chat script-1',
          '  execute_tool task (error)',
          '    invoke_agent exiter (crashed)',
          '      chat script-1',
          '      execute_tool exit (cancelled)',
          '  execute_tool task (ok)',
          ...leafTree(2),
        ].join('\n'),
      );
      const crashed = only(spans, 'invoke_agent exiter');
      assert.deepEqual(crashed.status, {
        code: SpanStatusCode.ERROR,
        message: 'crashed: its worker exited with code 3',
      });
      assert.equal(crashed.attributes[TroupeAttr.exitCode], 3);
      assert.equal(crashed.attributes[GenAi.errorType], 'ERR_WORKER_CRASHED');
      assert.deepEqual(only(spans, 'execute_tool exit').status, {
        code: SpanStatusCode.ERROR,
        message: 'interrupted: its worker crashed',
      });
      await supervisor.stopAgent(agent.id);
    } finally {
      tracing.stop();
    }
  });

  it('a suspension answered and resumed: suspended spans are not errors; the resumed runs link to them', async () => {
    const { exporter, tracer } = memoryTracing();
    const tracing = instrument(supervisor, { tracer });
    try {
      const agent = await supervisor.startAgent(askParent, { scope });
      const first = await agent.send('go');
      assert.equal(first.status, 'suspended');
      const suspended = exporter.getFinishedSpans();
      assert.equal(
        renderTree(suspended),
        [
          'invoke_agent askParent (suspended)',
          '  chat script-1',
          '  execute_tool task (suspended)',
          '    invoke_agent asker (suspended)',
          '      chat script-1',
          '      execute_tool ask (suspended)',
        ].join('\n'),
      );
      assert.ok(suspended.every((s) => s.status.code === SpanStatusCode.UNSET));
      const requestId = first.status === 'suspended' ? first.request.id : '';
      assert.equal(only(suspended, 'invoke_agent asker').attributes[TroupeAttr.requestId], requestId);
      assert.equal(only(suspended, 'invoke_agent askParent').attributes[TroupeAttr.requestId], requestId);

      exporter.reset();
      // The answer comes in on a request of its own: the resumed runs belong to it.
      const answered = await tracer.startActiveSpan('POST /answer', async (span) => {
        try {
          return await supervisor.answer(requestId, { ok: true });
        } finally {
          span.end();
        }
      });
      assert.equal(answered.status, 'done');
      const resumed = exporter.getFinishedSpans();
      assert.equal(
        renderTree(resumed),
        [
          'POST /answer',
          '  invoke_agent asker (done)',
          '    chat script-1',
          '    execute_tool ask (ok)',
          '  invoke_agent askParent (done)',
          '    chat script-1',
        ].join('\n'),
      );
      const linkOf = (name: string): Link | undefined => only(resumed, name).links[0];
      for (const name of ['invoke_agent asker', 'invoke_agent askParent']) {
        assert.equal(only(resumed, name).attributes[TroupeAttr.runResumed], true);
        assert.deepEqual(linkOf(name)?.context, only(suspended, name).spanContext(), `${name} links to its suspension`);
        assert.equal(
          only(resumed, name).attributes[TroupeAttr.runId],
          only(suspended, name).attributes[TroupeAttr.runId],
        );
      }
      assert.equal(tracing.stats().open, 0);
      await supervisor.stopAgent(agent.id);
    } finally {
      tracing.stop();
    }
  });

  it("the host's active span parents the tree: a send, a queued send, a direct spawn", async () => {
    const { exporter, tracer } = memoryTracing();
    const tracing = instrument(supervisor, { tracer });
    try {
      const agent = await supervisor.startAgent(leaf, { scope });
      const request = (name: string, work: () => Promise<unknown>) =>
        tracer.startActiveSpan(name, async (span) => {
          try {
            return await work();
          } finally {
            span.end();
          }
        });
      // Two requests at once to one agent: the second message waits in the mailbox and starts
      // from the first's continuation — it still belongs to its own request.
      await Promise.all([
        request('POST /one', () => agent.send('one')),
        request('POST /two', () => agent.send('two')),
        request('job', () => supervisor.spawn(leaf, { input: 'direct', scope })),
      ]);
      const spans = exporter.getFinishedSpans();
      assert.equal(
        renderTree(spans),
        [
          'job',
          ...leafTree(1),
          'POST /one',
          ...leafTree(1),
          // The conversation's second message: the script answers at once.
          'POST /two',
          '  invoke_agent leaf (done)',
          '    chat script-1',
        ].join('\n'),
      );
      for (const name of ['POST /one', 'POST /two', 'job']) {
        const host = only(spans, name);
        const run = spans.find((s) => s.parentSpanContext?.spanId === host.spanContext().spanId) as ReadableSpan;
        assert.equal(run.spanContext().traceId, host.spanContext().traceId, `${name}: one trace`);
      }
      await supervisor.stopAgent(agent.id);
    } finally {
      tracing.stop();
    }
  });

  it('sets what a sampler needs at span start', async () => {
    const seen: { name: string; attributes: Attributes }[] = [];
    const sampler: Sampler = {
      shouldSample: (_ctx, _trace, name, _kind, attributes): SamplingResult => {
        seen.push({ name, attributes: { ...attributes } });
        return { decision: 1 }; // RECORD: not sampled, not exported
      },
      toString: () => 'recording sampler',
    };
    const provider = new BasicTracerProvider({ sampler });
    const tracing = instrument(supervisor, { tracer: provider.getTracer('sampled') });
    try {
      const outcome = await supervisor.spawn(leaf, { input: 'go', scope });
      assert.equal(outcome.status, 'done');
      const agentSpan = seen.find((s) => s.name === 'invoke_agent leaf');
      assert.deepEqual(
        [GenAi.operationName, GenAi.agentName, GenAi.providerName, GenAi.requestModel].map(
          (k) => agentSpan?.attributes[k],
        ),
        ['invoke_agent', 'leaf', 'troupe-test', 'script-1'],
      );
      const chat = seen.find((s) => s.name === 'chat script-1');
      assert.deepEqual(
        [GenAi.operationName, GenAi.providerName, GenAi.requestModel].map((k) => chat?.attributes[k]),
        ['chat', 'troupe-test', 'script-1'],
      );
      const tool = seen.find((s) => s.name === 'execute_tool work');
      assert.deepEqual(
        [GenAi.operationName, GenAi.toolName].map((k) => tool?.attributes[k]),
        ['execute_tool', 'work'],
      );
    } finally {
      tracing.stop();
    }
  });

  it('stop() removes every listener it added (with no bridge, nothing of it runs)', async () => {
    const names = [
      'agent.run.started',
      'subagent.spawned',
      'tool.execute.start',
      'model.start',
      'model.delta',
      'agent.done',
    ] as const;
    const before = names.map((n) => supervisor.listenerCount(n));
    const tracing = instrument(supervisor, { tracer: memoryTracing().tracer, captureContent: {} });
    assert.ok(names.every((n, i) => supervisor.listenerCount(n) === (before[i] ?? 0) + 1));
    tracing.stop();
    tracing.stop();
    assert.deepEqual(
      names.map((n) => supervisor.listenerCount(n)),
      before,
    );
  });

  it('validates its options, one rule each, with errors that say what to pass', () => {
    assert.throws(() => instrument({} as never), /pass a supervisor made with createSupervisor/);
    assert.throws(() => instrument(supervisor, null as never), /options must be an object/);
    assert.throws(() => instrument(supervisor, { tracer: {} as never }), /must be an OpenTelemetry Tracer/);
    assert.throws(() => instrument(supervisor, { tenant: 'org' as never }), /tenant must be a function/);
    assert.throws(() => instrument(supervisor, { onError: 1 as never }), /onError must be a function/);
    assert.throws(() => instrument(supervisor, { captureContent: true as never }), /captureContent must be an object/);
    assert.throws(() => instrument(supervisor, { captureContent: { maxLength: 0 } }), /maxLength must be a positive/);
  });

  it('without a tracer, uses the global provider', async () => {
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    assert.equal(trace.setGlobalTracerProvider(provider), true);
    const tracing = instrument(supervisor);
    try {
      assert.equal((await supervisor.spawn(leaf, { input: 'go', scope })).status, 'done');
      assert.equal(renderTree(exporter.getFinishedSpans()), leafTree(0).join('\n'));
      assert.equal(exporter.getFinishedSpans()[0]?.instrumentationScope.name, '@troupe/otel');
    } finally {
      tracing.stop();
      trace.disable();
    }
  });
});
