// What the spans may carry: never a scope or toolContext value; a tenant only
// as the integrator's hook made it; content only when turned on, truncated.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { GenAi, instrument, TroupeAttr } from '@troupe/otel';
import { createSupervisor, type Supervisor } from '@troupe/supervisor';
import { chattyParent } from './agents.js';
import { memoryTracing, only } from './traceTree.js';

// Values no span may hold, in any field: each is distinctive enough that a substring match means a leak.
const scope = Object.freeze({ tenantId: 'tenant-QX7Z9', userId: 'user-5521-PRIVATE', role: 'role-ZEBRA44' });
const toolContext = Object.freeze({ apiKey: 'sk-live-SECRET9931', requestId: 'req-PLUM-8812' });
const secrets = [...Object.values(scope), ...Object.values(toolContext)];

const hashTenant = (s: unknown): string =>
  createHash('sha256')
    .update((s as { tenantId: string }).tenantId)
    .digest('hex')
    .slice(0, 16);

/** Every string a span would export: name, attributes, events, links, status, resource, scope. */
function exported(span: ReadableSpan): string {
  return JSON.stringify({
    name: span.name,
    attributes: span.attributes,
    events: span.events,
    links: span.links,
    status: span.status,
    resource: span.resource.attributes,
    scope: span.instrumentationScope,
  });
}

describe('@troupe/otel: privacy', () => {
  let supervisor: Supervisor;
  before(async () => {
    supervisor = createSupervisor({ pool: { threads: 2 } });
    await supervisor.pool.ready();
  });
  after(() => supervisor.destroy());

  const run = async (options: Parameters<typeof instrument>[1]): Promise<ReadableSpan[]> => {
    const { exporter, tracer } = memoryTracing();
    const tracing = instrument(supervisor, { tracer, ...options });
    try {
      const agent = await supervisor.startAgent(chattyParent, { scope, toolContext });
      const reply = await agent.send('talk');
      assert.equal(reply.status, 'done');
      // The run did carry the secrets: the child's tool echoed them into its result.
      assert.ok(reply.status === 'done' && reply.text === 'relayed talk');
      const child = await supervisor.spawn(chattyParent.subagents[0] as never, { input: 'x', scope, toolContext });
      assert.equal(child.status, 'done');
      assert.ok(child.status === 'done' && secrets.every((s) => child.result.includes(s)), 'the tool saw every value');
      await supervisor.stopAgent(agent.id);
      return exporter.getFinishedSpans();
    } finally {
      tracing.stop();
    }
  };

  it('records no scope or toolContext value in any span; the tenant only as the hook made it', async () => {
    const spans = await run({ tenant: hashTenant });
    assert.ok(spans.length >= 10, `${spans.length} spans`);
    for (const span of spans) {
      const text = exported(span);
      for (const secret of secrets) assert.ok(!text.includes(secret), `${span.name} holds ${secret}: ${text}`);
    }
    const expected = hashTenant(scope);
    const agentSpans = spans.filter((s) => s.name.startsWith('invoke_agent'));
    assert.ok(agentSpans.length === 3);
    assert.ok(
      agentSpans.every((s) => s.attributes[TroupeAttr.tenant] === expected),
      'every run carries the hash',
    );
  });

  it('records content only when turned on: none by default', async () => {
    const spans = await run({});
    for (const span of spans) {
      assert.equal(span.attributes[GenAi.outputMessages], undefined, span.name);
      assert.equal(span.attributes[GenAi.toolCallArguments], undefined, span.name);
      assert.equal(span.attributes[TroupeAttr.tenant], undefined, span.name);
    }
  });

  it('with captureContent: model answers and tool arguments, as streamed, cut to maxLength', async () => {
    const spans = await run({ captureContent: { maxLength: 12 } });
    const lookups = spans.filter((s) => s.name === 'execute_tool lookup');
    assert.equal(lookups.length, 2);
    for (const lookup of lookups) {
      // {"query":"what the user asked for, at some length"} — the first 12 characters, and the mark of the cut.
      assert.equal(lookup.attributes[GenAi.toolCallArguments], '{"query":"wh…');
    }
    const task = only(spans, 'execute_tool task');
    assert.equal(task.attributes[GenAi.toolCallArguments], '{"subagent":…');
    const answers = spans
      .filter((s) => s.name === 'chat script-1' && s.attributes[GenAi.outputMessages] !== undefined)
      .map((s) => JSON.parse(String(s.attributes[GenAi.outputMessages])) as { parts: { content: string }[] }[]);
    assert.deepEqual(answers.map((m) => m[0]?.parts[0]?.content).sort(), [
      'relayed talk',
      'the lookup s…',
      'the lookup s…',
    ]);
  });

  it('a tenant hook that throws or returns a non-string records nothing and breaks nothing', async () => {
    const errors: unknown[] = [];
    const spans = await run({
      tenant: () => {
        throw new Error('hook failed');
      },
      onError: (e) => errors.push(e),
    });
    assert.ok(spans.every((s) => s.attributes[TroupeAttr.tenant] === undefined));
    assert.ok(errors.length >= 1 && errors.every((e) => (e as Error).message === 'hook failed'));
    const odd = await run({ tenant: () => 42 as never });
    assert.ok(odd.every((s) => s.attributes[TroupeAttr.tenant] === undefined));
  });
});
