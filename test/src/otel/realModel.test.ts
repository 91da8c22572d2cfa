// @troupe/otel over a real model path: a parent on openaiModel fans out to two
// subagents whose models stream from a chat-completions server on 127.0.0.1,
// under the host's request span, exported through the SDK's InMemorySpanExporter.
import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import { after, before, describe, it } from 'node:test';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { GenAi, instrument, TroupeAttr } from '@troupe/otel';
import { createSupervisor, type Supervisor } from '@troupe/supervisor';
import { ChatServer, event, finishChunk, json, type Received, startSse, textChunk } from '../openai/chatServer.js';
import { memoryTracing, renderTree, useAsyncContext } from './traceTree.js';

const BASE_URL_VARIABLE = 'TROUPE_TEST_CHAT_BASE_URL';
const KEY = 'sk-troupe-SECRET-7731';
const scope = Object.freeze({ tenantId: 'tenant-OTEL-5512', userId: 'user-OTEL-PRIVATE' });
const toolContext = Object.freeze({ requestId: 'req-OTEL-8812', flag: 'flag-OTEL-ZEBRA' });
const secrets = [KEY, ...Object.values(scope), ...Object.values(toolContext)];

/** Every string a span exports: name, attributes, events, links, status. */
const exported = (span: ReadableSpan): string =>
  JSON.stringify({
    name: span.name,
    attributes: span.attributes,
    events: span.events,
    links: span.links,
    status: span.status,
  });

const lastUser = (r: Received): string => {
  const users = (r.body.messages as { role: string; content: string }[]).filter((m) => m.role === 'user');
  return users.at(-1)?.content ?? '';
};

/** The lead asks for two workers in one turn, then answers; a worker answers its instructions' way. */
function route(workerText: (instructions: string) => string) {
  return (res: ServerResponse, r: Received): void => {
    if (r.body.model === 'lead-model') {
      const hasResults = (r.body.messages as { role: string }[]).some((m) => m.role === 'tool');
      startSse(res);
      if (hasResults) {
        event(res, textChunk('all done', { model: 'served-lead' }));
        event(res, finishChunk());
      } else {
        const call = (i: number, instructions: string) => ({
          index: i,
          id: `call_${i}`,
          type: 'function',
          function: { name: 'task', arguments: JSON.stringify({ subagent: 'fc-worker', instructions }) },
        });
        event(res, { choices: [{ index: 0, delta: { tool_calls: [call(0, 'first'), call(1, 'second')] } }] });
        event(res, finishChunk('tool_calls'));
      }
      res.end('data: [DONE]\n\n');
      return;
    }
    const instructions = lastUser(r);
    if (instructions.includes('refuse')) {
      json(res, 401, { error: { message: `Incorrect API key provided: ${KEY}` } });
      return;
    }
    startSse(res);
    event(res, textChunk(workerText(instructions), { model: 'served-worker' }));
    event(res, finishChunk());
    event(res, {
      choices: [],
      usage: {
        prompt_tokens: 11,
        completion_tokens: 7,
        prompt_tokens_details: { cached_tokens: 5 },
        completion_tokens_details: { reasoning_tokens: 3 },
      },
    });
    res.end('data: [DONE]\n\n');
  };
}

describe('@troupe/otel with a real model server', () => {
  let server: ChatServer;
  let supervisor: Supervisor;
  let agents: typeof import('../openai/serverAgents.js');
  before(async () => {
    useAsyncContext();
    server = await ChatServer.start();
    process.env[BASE_URL_VARIABLE] = server.baseURL;
    agents = await import('../openai/serverAgents.js');
    supervisor = createSupervisor({ pool: { threads: 2 } });
  });
  after(async () => {
    await supervisor?.close({ timeoutMs: 5000 });
    await server?.close();
  });

  it('a fan-out under the host span: the tree, GenAI usage from the server, no key or scope value anywhere', async () => {
    server.reset();
    const handler = route((instructions) => `answer to ${instructions}`);
    server.script(handler, handler, handler, handler);
    const { exporter, tracer } = memoryTracing();
    const tracing = instrument(supervisor, { tracer });
    try {
      const agent = await supervisor.startAgent(agents.lead, { scope, toolContext });
      const reply = await tracer.startActiveSpan('POST /messages', async (span) => {
        try {
          return await agent.send('fan out');
        } finally {
          span.end();
        }
      });
      assert.equal(reply.status, 'done');
      await supervisor.stopAgent(agent.id);
      const spans = exporter.getFinishedSpans();
      assert.equal(
        renderTree(spans),
        [
          'POST /messages',
          '  invoke_agent fc-lead (done)',
          '    chat lead-model',
          '    chat lead-model',
          '    execute_tool task (ok)',
          '      invoke_agent fc-worker (done)',
          '        chat worker-model',
          '    execute_tool task (ok)',
          '      invoke_agent fc-worker (done)',
          '        chat worker-model',
        ].join('\n'),
      );
      const host = spans.find((s) => s.name === 'POST /messages') as ReadableSpan;
      for (const s of spans) assert.equal(s.spanContext().traceId, host.spanContext().traceId, `${s.name}: one trace`);
      const workerChats = spans.filter((s) => s.name === 'chat worker-model');
      for (const chat of workerChats) {
        assert.equal(chat.attributes[GenAi.operationName], 'chat');
        assert.equal(chat.attributes[GenAi.providerName], 'openai-compatible');
        assert.equal(chat.attributes[GenAi.requestModel], 'worker-model');
        assert.equal(chat.attributes[GenAi.responseModel], 'served-worker');
        assert.deepEqual(chat.attributes[GenAi.responseFinishReasons], ['stop']);
        assert.equal(chat.attributes[GenAi.usageInputTokens], 11);
        assert.equal(chat.attributes[GenAi.usageOutputTokens], 7);
        assert.equal(chat.attributes[GenAi.usageCacheReadInputTokens], 5);
        assert.equal(chat.attributes[GenAi.usageReasoningOutputTokens], 3);
        assert.equal(typeof chat.attributes[GenAi.responseTimeToFirstChunk], 'number');
      }
      const lead = spans.find((s) => s.name === 'invoke_agent fc-lead') as ReadableSpan;
      assert.equal(lead.attributes[TroupeAttr.totalInputTokens], 22, 'the subtree total of the server-reported usage');
      for (const s of spans) assert.equal(s.attributes[GenAi.outputMessages], undefined, 'content is off by default');
      for (const s of spans) {
        const text = exported(s);
        for (const secret of secrets) assert.ok(!text.includes(secret), `${s.name} exports ${secret}`);
      }
    } finally {
      tracing.stop();
    }
  });

  it('a worker refused with the key echoed: its chat span says ERR_MODEL_AUTH and holds no key', async () => {
    server.reset();
    const handler = route(() => 'x');
    server.script(handler, handler);
    const { exporter, tracer } = memoryTracing();
    const tracing = instrument(supervisor, { tracer });
    try {
      const outcome = await supervisor.spawn(agents.worker, { input: 'please refuse', scope, toolContext });
      assert.equal(outcome.status, 'failed');
      const spans = exporter.getFinishedSpans();
      const chat = spans.find((s) => s.name === 'chat worker-model') as ReadableSpan;
      assert.equal(chat.attributes[GenAi.errorType], 'ERR_MODEL_AUTH');
      for (const s of spans) {
        const text = exported(s);
        for (const secret of secrets) assert.ok(!text.includes(secret), `${s.name} exports ${secret}`);
      }
    } finally {
      tracing.stop();
    }
  });

  it('content capture truncates to maxLength without splitting a character (no lone surrogate exported)', async () => {
    server.reset();
    // 4 ASCII characters, then an emoji (two UTF-16 code units): a cut at 5 falls inside it.
    const handler = route(() => 'abcd😀 and more text after the cut');
    server.script(handler);
    const { exporter, tracer } = memoryTracing();
    const tracing = instrument(supervisor, { tracer, captureContent: { maxLength: 5 } });
    try {
      const outcome = await supervisor.spawn(agents.worker, { input: 'write', scope, toolContext });
      assert.equal(outcome.status, 'done');
      const chat = exporter.getFinishedSpans().find((s) => s.name === 'chat worker-model') as ReadableSpan;
      const output = chat.attributes[GenAi.outputMessages];
      assert.equal(typeof output, 'string', 'with content on, the answer is recorded');
      const content = JSON.parse(output as string)[0].parts[0].content as string;
      assert.ok(content.startsWith('abcd'), content);
      assert.ok(content.length < 'abcd😀 and more text after the cut'.length, 'truncated');
      assert.doesNotMatch(
        content,
        /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/,
        `a cut inside a surrogate pair exports a string that is not valid Unicode (OTLP/protobuf turns it into U+FFFD): ${JSON.stringify(content)}`,
      );
    } finally {
      tracing.stop();
    }
  });
});
