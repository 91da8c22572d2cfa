import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  type AgentId,
  type AgentStateView,
  type Answer,
  type AnyTool,
  type ApprovalDecision,
  type ApprovalHandler,
  type ApprovalRequest,
  CancelledError,
  type CancelReason,
  CancelSource,
  ContextUpdate,
  createId,
  defineTool,
  isTroupeError,
  sealScope,
  type ToolContext,
  type ToolEvents,
  ToolResult,
  ToolTimeoutError,
  TroupeError,
} from '@troupe/core';
import {
  type ExecuteToolOptions,
  executeTool,
  localRunCancellation,
  type RunContext,
  scrub,
  type ToolExecution,
} from '@troupe/core/internal';
import { ManualClock } from '@troupe/core/testing';
import { EventEmitter } from 'eventemitter3';
import { z } from 'zod';
import { afterWakeups } from '../fixtures/afterWakeups.js';

const agentId = 'agent_p-sub-1' as AgentId;
const parentAgentId = 'agent_p' as AgentId;

interface Deferred<T> {
  readonly promise: Promise<T>;
  resolve(value: T): void;
  reject(error: unknown): void;
}

function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

type Logged = { [K in keyof ToolEvents]: [K, ToolEvents[K][0]] }[keyof ToolEvents];

interface Harness {
  readonly clock: ManualClock;
  readonly source: CancelSource;
  readonly events: EventEmitter<ToolEvents>;
  readonly log: Logged[];
  exec(tool: AnyTool, args: unknown, over?: Partial<ExecuteToolOptions>): Promise<ToolExecution>;
}

function harness(runDeadline?: number): Harness {
  const clock = new ManualClock();
  const source = new CancelSource();
  const cancellation = localRunCancellation(source, runDeadline);
  const events = new EventEmitter<ToolEvents>();
  const log: Logged[] = [];
  events.on('tool.execute.start', (e) => log.push(['tool.execute.start', e]));
  events.on('tool.execute.stop', (e) => log.push(['tool.execute.stop', e]));
  events.on('tool.execute.exception', (e) => log.push(['tool.execute.exception', e]));
  events.on('tool.execute.timeout', (e) => log.push(['tool.execute.timeout', e]));
  events.on('tool.approval.invalid', (e) => log.push(['tool.approval.invalid', e]));
  const run: RunContext = {
    scope: sealScope({ userId: 'u1' }),
    toolContext: Object.freeze({ requestId: 'req-1' }),
    agentId,
    parentAgentId,
  };
  const state: AgentStateView = { agentId, messages: [], todos: [], metadata: Object.freeze({ title: 'chat' }) };
  return {
    clock,
    source,
    events,
    log,
    exec: (tool, args, over = {}) =>
      executeTool(
        tool,
        { id: createId('call'), arguments: args },
        { clock, run, state, cancellation, events, ...over },
      ),
  };
}

const Args = z.object({ n: z.number() });

/** A tool whose behaviour per attempt is scripted; records every context it sees. */
function scripted(
  behaviour: (attempt: number, ctx: ToolContext, args: { n: number }) => unknown,
  options: { retries?: number; timeoutMs?: number | null; requiresApproval?: boolean } = {},
) {
  const seen: ToolContext[] = [];
  const argsSeen: { n: number }[] = [];
  const tool = defineTool({
    name: 'scripted',
    description: 'test tool',
    parameters: Args,
    execute: (args, ctx) => {
      seen.push(ctx);
      argsSeen.push(args);
      return behaviour(ctx.attempt, ctx, args) as never;
    },
    ...options,
  });
  return { tool, seen, argsSeen };
}

/** Every payload of the event `name`, in order. */
function payloads<K extends keyof ToolEvents>(log: Logged[], name: K): ToolEvents[K][0][] {
  return log.filter(([n]) => n === name).map(([, e]) => e as ToolEvents[K][0]);
}

/** The `nth` payload of the event `name`; fails the test when there is none. */
function payload<K extends keyof ToolEvents>(log: Logged[], name: K, nth = 0): ToolEvents[K][0] {
  const found = payloads(log, name)[nth];
  assert.ok(found !== undefined, `no ${name} event #${nth}`);
  return found;
}

function kinds(log: Logged[]): string[] {
  return log.map(([name]) => name);
}

function failed(result: ToolExecution): Extract<ToolExecution, { status: 'error' }> {
  assert.equal(result.status, 'error', `expected an error result, got ${result.status}`);
  return result as Extract<ToolExecution, { status: 'error' }>;
}

describe('executeTool: attempts and retries', () => {
  it('a plain return value is ok on the first attempt', async () => {
    const h = harness();
    const { tool, seen } = scripted((_a, _c, { n }) => n * 2);
    const result = await h.exec(tool, { n: 21 });
    assert.deepEqual(result, { status: 'ok', value: 42, update: undefined, attempts: 1 });
    assert.equal(seen.length, 1);
  });

  it('retry then succeed on attempt 2 with retries: 2', async () => {
    const h = harness();
    const { tool, seen } = scripted(
      (attempt) => {
        if (attempt === 1) throw new Error('flaky');
        return 'second time lucky';
      },
      { retries: 2 },
    );
    const result = await h.exec(tool, { n: 1 });
    assert.equal(result.status, 'ok');
    assert.ok(result.status === 'ok' && result.value === 'second time lucky');
    assert.equal(result.attempts, 2);
    assert.deepEqual(
      seen.map((c) => c.attempt),
      [1, 2],
      'ctx.attempt tells a retry apart',
    );
    assert.deepEqual(
      payloads(h.log, 'tool.execute.exception').map((e) => [e.attempt, e.willRetry]),
      [[1, true]],
    );
  });

  it('always failing with retries: 2 ends with attempt 3 and the original message', async () => {
    const h = harness();
    const boom = new Error('disk on fire');
    const { tool, seen } = scripted(
      () => {
        throw boom;
      },
      { retries: 2 },
    );
    const result = failed(await h.exec(tool, { n: 1 }));
    assert.equal(result.kind, 'thrown');
    assert.equal(result.attempts, 3);
    assert.equal(result.error, boom);
    assert.equal(result.error.message, 'disk on fire');
    assert.equal(seen.length, 3);
    assert.deepEqual(
      payloads(h.log, 'tool.execute.exception').map((e) => e.willRetry),
      [true, true, false],
    );
  });

  it('retries: 0 makes one attempt', async () => {
    const h = harness();
    const { tool, seen } = scripted(
      () => {
        throw new Error('once');
      },
      { retries: 0 },
    );
    const result = failed(await h.exec(tool, { n: 1 }));
    assert.equal(result.attempts, 1);
    assert.equal(seen.length, 1);
  });

  it('the default (retries 1) makes two attempts', async () => {
    const h = harness();
    const { tool, seen } = scripted(() => Promise.reject(new Error('async failure')));
    const result = failed(await h.exec(tool, { n: 1 }));
    assert.equal(result.attempts, 2);
    assert.equal(seen.length, 2);
    assert.equal(result.error.message, 'async failure');
  });

  it('a returned error is not retried', async () => {
    const h = harness();
    const update = ContextUpdate.empty().append('failures', 1);
    const { tool, seen } = scripted(() => ToolResult.error('not found', update), { retries: 3 });
    const result = failed(await h.exec(tool, { n: 1 }));
    assert.equal(result.kind, 'returned');
    assert.equal(result.attempts, 1);
    assert.equal(result.error.message, 'not found');
    assert.equal(result.update, update, 'a returned error keeps its update');
    assert.equal(seen.length, 1);
  });

  it("a misuse of Troupe's API thrown inside the tool (a protected key, a value JSON cannot carry) is not retried", async () => {
    for (const misuse of [
      () => ContextUpdate.empty().set('troupe.owned', 1),
      () => ContextUpdate.empty().set('when', new Date(0)),
    ]) {
      const h = harness();
      const { tool, seen } = scripted(() => ToolResult.ok('v', misuse()), { retries: 3 });
      const result = failed(await h.exec(tool, { n: 1 }));
      assert.equal(result.kind, 'thrown');
      assert.equal(result.attempts, 1, result.error.message);
      assert.equal(seen.length, 1);
      assert.ok(isTroupeError(result.error, 'ERR_PROTECTED_KEY') || isTroupeError(result.error, 'ERR_NOT_JSON'));
      assert.equal(payload(h.log, 'tool.execute.exception').willRetry, false);
    }
  });

  it('ctx.cancel() cancels the run from inside the tool: isCancelled() flips at once; a bad reason is refused', async () => {
    const h = harness();
    const seen: boolean[] = [];
    const { tool } = scripted((_a, ctx) => {
      seen.push(ctx.isCancelled());
      assert.throws(
        () => ctx.cancel('later' as never),
        (e: unknown) => isTroupeError(e, 'ERR_INVALID_ARGUMENT'),
      );
      seen.push(ctx.isCancelled());
      ctx.cancel();
      seen.push(ctx.isCancelled());
      return 'returned after the cancel';
    });
    await h.exec(tool, { n: 1 });
    assert.deepEqual(seen, [false, false, true]);
    assert.equal(h.source.reason, 'user', "the run's own source is cancelled (the loop ends the run cancelled)");
  });

  it('a thrown non-Error becomes a TroupeError ERR_TOOL_FAILED', async () => {
    const h = harness();
    const { tool } = scripted(
      () => {
        throw 'a string';
      },
      { retries: 0 },
    );
    const result = failed(await h.exec(tool, { n: 1 }));
    assert.ok(isTroupeError(result.error, 'ERR_TOOL_FAILED'));
    assert.equal(result.error.message, 'a string');
  });

  it('ToolResult.ok carries its update; ToolResult.pending suspends (not an approval)', async () => {
    const h = harness();
    const update = ContextUpdate.empty().set('k', 1);
    const ok = await h.exec(scripted(() => ToolResult.ok('v', update)).tool, { n: 1 });
    assert.deepEqual(ok, { status: 'ok', value: 'v', update, attempts: 1 });
    const pending = await h.exec(scripted(() => ToolResult.pending({ kind: 'input', prompt: 'Which?' })).tool, {
      n: 1,
    });
    assert.equal(pending.status, 'pending');
    assert.ok(pending.status === 'pending' && pending.approval === false && pending.request.kind === 'input');
  });

  it('the answer reaches ctx.answer only on a resumed call', async () => {
    const h = harness();
    const { tool, seen } = scripted((_a, ctx) =>
      ctx.answer === undefined
        ? ToolResult.pending({ kind: 'input', prompt: 'env?' })
        : `deployed to ${String((ctx.answer.data as { env: string }).env)}`,
    );
    const first = await h.exec(tool, { n: 1 });
    assert.equal(first.status, 'pending');
    const answer: Answer = {
      id: first.status === 'pending' ? first.request.id : '',
      ok: true,
      data: { env: 'staging' },
    };
    const second = await h.exec(tool, { n: 1 }, { answer });
    assert.ok(second.status === 'ok' && second.value === 'deployed to staging');
    assert.equal(seen[0]?.answer, undefined);
    assert.equal(seen[1]?.answer, answer);
  });
});

describe('executeTool: validation', () => {
  for (const [what, args, field] of [
    ['a missing field', {}, 'n'],
    ['a wrong type', { n: 'seven' }, 'n'],
    ['not an object', 'nope', 'arguments'],
  ] as const) {
    it(`${what} never invokes the tool and is never retried`, async () => {
      const h = harness();
      const { tool, seen } = scripted(() => 'ran', { retries: 5 });
      const result = failed(await h.exec(tool, args));
      assert.equal(result.kind, 'validation');
      assert.equal(result.attempts, 0);
      assert.ok(isTroupeError(result.error, 'ERR_TOOL_VALIDATION'));
      assert.match(result.error.message, new RegExp(`^invalid arguments for tool "scripted": ${field}: `));
      assert.equal(seen.length, 0);
      assert.deepEqual(kinds(h.log), ['tool.execute.exception', 'tool.execute.stop']);
    });
  }

  it('the tool receives the parsed arguments', async () => {
    const h = harness();
    const tool = defineTool({
      name: 'parsed',
      description: 'd',
      parameters: z.object({ n: z.coerce.number() }),
      execute: ({ n }) => n + 1,
    });
    const result = await h.exec(tool, { n: '41' });
    assert.ok(result.status === 'ok' && result.value === 42);
  });
});

describe('executeTool: approval', () => {
  function spyHandler(decide: (request: ApprovalRequest) => unknown): {
    handler: ApprovalHandler;
    calls: ApprovalRequest[];
    signals: AbortSignal[];
  } {
    const calls: ApprovalRequest[] = [];
    const signals: AbortSignal[] = [];
    const handler: ApprovalHandler = (request, { signal }) => {
      calls.push(request);
      signals.push(signal);
      return decide(request) as ApprovalDecision;
    };
    return { handler, calls, signals };
  }

  it('not required: runs, and the handler is not consulted', async () => {
    const h = harness();
    const spy = spyHandler(() => ({ decision: 'reject' }));
    const { tool, seen } = scripted(() => 'ran');
    const result = await h.exec(tool, { n: 1 }, { approval: spy.handler });
    assert.equal(result.status, 'ok');
    assert.equal(seen.length, 1);
    assert.equal(spy.calls.length, 0);
  });

  it('required with no handler: denied, not run', async () => {
    const h = harness();
    const { tool, seen } = scripted(() => 'ran', { requiresApproval: true });
    const result = failed(await h.exec(tool, { n: 1 }));
    assert.equal(result.kind, 'approval');
    assert.ok(isTroupeError(result.error, 'ERR_APPROVAL_DENIED'));
    assert.match(result.error.message, /no approval handler is configured/);
    assert.equal(seen.length, 0);
  });

  it('the handler approves: runs with the original arguments', async () => {
    const h = harness();
    const spy = spyHandler(() => ({ decision: 'approve' }));
    const { tool, argsSeen } = scripted((_a, _c, { n }) => n, { requiresApproval: true });
    const result = await h.exec(tool, { n: 7 }, { approval: spy.handler });
    assert.ok(result.status === 'ok' && result.value === 7);
    assert.deepEqual(argsSeen, [{ n: 7 }]);
    assert.equal(spy.calls.length, 1);
    const asked = spy.calls[0] as ApprovalRequest;
    assert.equal(asked.toolName, 'scripted');
    assert.deepEqual(asked.arguments, { n: 7 });
    assert.equal(asked.agentId, agentId);
    assert.equal(asked.parentAgentId, parentAgentId);
    assert.ok(spy.signals[0] instanceof AbortSignal);
  });

  it('the handler rejects: denied with its reason, not run', async () => {
    const h = harness();
    const spy = spyHandler(() => ({ decision: 'reject', reason: 'too risky' }));
    const { tool, seen } = scripted(() => 'ran', { requiresApproval: true });
    const result = failed(await h.exec(tool, { n: 1 }, { approval: spy.handler }));
    assert.equal(result.kind, 'approval');
    assert.ok(isTroupeError(result.error, 'ERR_APPROVAL_DENIED'));
    assert.match(result.error.message, /rejected by the approval handler: too risky/);
    assert.equal(seen.length, 0);
  });

  it('the handler edits the arguments: the tool runs with the edited ones', async () => {
    const h = harness();
    const spy = spyHandler(() => ({ decision: 'edit', arguments: { n: 3 } }));
    const { tool, argsSeen } = scripted((_a, _c, { n }) => n, { requiresApproval: true });
    const result = await h.exec(tool, { n: 1000 }, { approval: spy.handler });
    assert.ok(result.status === 'ok' && result.value === 3);
    assert.deepEqual(argsSeen, [{ n: 3 }]);
  });

  it('edited arguments are validated', async () => {
    const h = harness();
    const spy = spyHandler(() => ({ decision: 'edit', arguments: { n: 'three' } }));
    const { tool, seen } = scripted(() => 'ran', { requiresApproval: true });
    const result = failed(await h.exec(tool, { n: 1 }, { approval: spy.handler }));
    assert.equal(result.kind, 'validation');
    assert.equal(seen.length, 0);
  });

  for (const [what, returned] of [
    ['an unknown decision', { decision: 'maybe' }],
    ['a boolean', true],
    ['nothing', undefined],
  ] as const) {
    it(`the handler returns ${what}: denied, with a tool.approval.invalid event`, async () => {
      const h = harness();
      const spy = spyHandler(() => returned);
      const { tool, seen } = scripted(() => 'ran', { requiresApproval: true });
      const result = failed(await h.exec(tool, { n: 1 }, { approval: spy.handler }));
      assert.equal(result.kind, 'approval');
      assert.ok(isTroupeError(result.error, 'ERR_APPROVAL_DENIED'));
      assert.match(result.error.message, /not a decision/);
      assert.equal(seen.length, 0);
      assert.equal(payloads(h.log, 'tool.approval.invalid').length, 1);
      const event = payload(h.log, 'tool.approval.invalid');
      assert.equal(event.toolName, 'scripted');
      assert.equal(event.received, JSON.stringify(returned) ?? String(returned));
    });
  }

  it('the handler throws: denied, not run', async () => {
    const h = harness();
    const spy = spyHandler(() => {
      throw new Error('handler down');
    });
    const { tool, seen } = scripted(() => 'ran', { requiresApproval: true });
    const result = failed(await h.exec(tool, { n: 1 }, { approval: spy.handler }));
    assert.equal(result.kind, 'approval');
    assert.match(result.error.message, /handler down/);
    assert.equal(seen.length, 0);
  });

  it('an async handler is awaited', async () => {
    const h = harness();
    const gate = deferred<ApprovalDecision>();
    const { tool, seen } = scripted(() => 'ran', { requiresApproval: true });
    const pending = h.exec(tool, { n: 1 }, { approval: () => gate.promise });
    await Promise.resolve();
    assert.equal(seen.length, 0, 'not run before the decision');
    gate.resolve({ decision: 'approve' });
    assert.equal((await pending).status, 'ok');
    assert.equal(seen.length, 1);
  });

  it('preApproved: true runs without asking', async () => {
    const h = harness();
    const spy = spyHandler(() => ({ decision: 'reject' }));
    const { tool, seen } = scripted(() => 'ran', { requiresApproval: true });
    const result = await h.exec(tool, { n: 1 }, { approval: spy.handler, preApproved: true });
    assert.equal(result.status, 'ok');
    assert.equal(seen.length, 1);
    assert.equal(spy.calls.length, 0);
  });

  it("the handler asks a person: pending with a request of kind 'approval'", async () => {
    const h = harness();
    const spy = spyHandler(() => ({ decision: 'ask', prompt: 'Delete the repo?' }));
    const { tool, seen } = scripted(() => 'ran', { requiresApproval: true });
    const result = await h.exec(tool, { n: 9 }, { approval: spy.handler });
    assert.equal(result.status, 'pending');
    assert.ok(result.status === 'pending');
    assert.equal(result.approval, true);
    assert.equal(result.attempts, 0);
    assert.equal(result.request.kind, 'approval');
    assert.equal(result.request.prompt, 'Delete the repo?');
    assert.match(result.request.id, /^req_/);
    assert.deepEqual(result.request.data, { toolName: 'scripted', arguments: { n: 9 } });
    assert.equal(seen.length, 0);
  });

  it("'ask' keeps a supervisor-issued request id, data and expiry", async () => {
    const h = harness();
    const spy = spyHandler(() => ({
      decision: 'ask',
      requestId: 'req_from_supervisor',
      prompt: 'ok?',
      data: { why: 'x' },
      expiresAt: 99,
    }));
    const { tool } = scripted(() => 'ran', { requiresApproval: true });
    const result = await h.exec(tool, { n: 1 }, { approval: spy.handler });
    assert.ok(result.status === 'pending');
    assert.deepEqual(result.request, {
      id: 'req_from_supervisor',
      kind: 'approval',
      prompt: 'ok?',
      data: { why: 'x' },
      expiresAt: 99,
    });
  });
});

describe('executeTool: timeout is terminal', () => {
  it('a tool that returns a value once its deadline fired elsewhere (the watchdog) is a timeout, not ok', async () => {
    // The watchdog cancels a lane at its deadline from the supervisor; the worker's own timer
    // may fire later. Which came first is a race the outcome must not depend on.
    const h = harness();
    const source = new CancelSource();
    const calls: CancelSource[] = [];
    const cancellation = {
      token: source,
      deadline: undefined,
      openCall: () => {
        const call = source.child();
        calls.push(call);
        return { token: call, cancel: (r: CancelReason) => call.cancel(r), close: () => call.dispose() };
      },
      cancel: (r: CancelReason) => source.cancel(r),
    };
    const { tool } = scripted(
      (_a, ctx) =>
        new Promise((resolve) => ctx.signal.addEventListener('abort', () => resolve('late value'), { once: true })),
      { timeoutMs: 10_000 },
    );
    const running = h.exec(tool, { n: 1 }, { cancellation });
    await afterWakeups();
    assert.equal(calls.length, 1);
    (calls[0] as CancelSource).cancel('deadline'); // the watchdog, before the executor's own timer
    const result = failed(await running);
    assert.equal(result.kind, 'timeout');
    assert.ok(result.error instanceof ToolTimeoutError);
  });

  it('a tool that overruns timeoutMs (retries 1) is invoked once and ends in a ToolTimeoutError', async () => {
    const h = harness();
    const started = deferred();
    const sawAbort: boolean[] = [];
    const { tool, seen } = scripted(
      (_a, ctx) => {
        ctx.signal.addEventListener('abort', () => sawAbort.push(ctx.isCancelled()));
        started.resolve();
        return new Promise(() => {}); // never settles by itself
      },
      { timeoutMs: 100, retries: 1 },
    );
    const running = h.exec(tool, { n: 1 });
    await started.promise;
    const ctx = seen[0] as ToolContext;
    assert.equal(ctx.timeoutMs, 100);
    assert.equal(ctx.deadline, h.clock.now() + 100);
    assert.equal(h.clock.pendingTimers, 1);
    h.clock.advance(99);
    assert.equal(ctx.isCancelled(), false, 'not before the deadline');
    assert.equal(ctx.signal.aborted, false);
    h.clock.advance(1);
    assert.equal(ctx.signal.aborted, true, 'the tool sees its signal abort');
    assert.equal(ctx.isCancelled(), true, 'and isCancelled() turn true');
    assert.deepEqual(sawAbort, [true]);
    assert.ok(ctx.signal.reason instanceof CancelledError);
    assert.equal((ctx.signal.reason as CancelledError).reason, 'deadline');

    const result = failed(await running);
    assert.equal(result.kind, 'timeout');
    assert.ok(result.error instanceof ToolTimeoutError);
    assert.ok(isTroupeError(result.error, 'ERR_TOOL_TIMEOUT'));
    assert.equal((result.error as ToolTimeoutError).timeoutMs, 100);
    assert.equal((result.error as ToolTimeoutError).toolName, 'scripted');
    assert.match(result.error.message, /never retried/);
    assert.equal(result.attempts, 1);
    assert.equal(seen.length, 1, 'a timed-out tool is never re-run');
    assert.equal(h.clock.pendingTimers, 0);
    assert.deepEqual(kinds(h.log), [
      'tool.execute.start',
      'tool.execute.timeout',
      'tool.execute.exception',
      'tool.execute.stop',
    ]);
    const exception = payload(h.log, 'tool.execute.exception');
    assert.equal(exception.kind, 'timeout');
    assert.equal(exception.willRetry, false);
    assert.equal(payload(h.log, 'tool.execute.timeout').timeoutMs, 100);
  });

  it('a tool that notices the deadline itself and throws is still a timeout, not retried', async () => {
    const h = harness();
    const started = deferred();
    const { tool, seen } = scripted(
      (_a, ctx) => {
        started.resolve();
        return new Promise((_resolve, reject) => {
          ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason));
        });
      },
      { timeoutMs: 50, retries: 3 },
    );
    const running = h.exec(tool, { n: 1 });
    await started.promise;
    h.clock.advance(50);
    const result = failed(await running);
    assert.equal(result.kind, 'timeout');
    assert.equal(seen.length, 1);
  });

  it('a tool that finishes in time clears its timer', async () => {
    const h = harness();
    const started = deferred();
    const finish = deferred<string>();
    const { tool, seen } = scripted(
      () => {
        started.resolve();
        return finish.promise;
      },
      { timeoutMs: 100 },
    );
    const running = h.exec(tool, { n: 1 });
    await started.promise;
    h.clock.advance(60);
    finish.resolve('done');
    const result = await running;
    assert.ok(result.status === 'ok' && result.value === 'done');
    assert.equal(h.clock.pendingTimers, 0);
    h.clock.advance(1_000);
    assert.equal((seen[0] as ToolContext).isCancelled(), false, 'no late cancel after completion');
  });

  it('no timeout (null): no timer, deadline and timeoutMs unset', async () => {
    const h = harness();
    const started = deferred();
    const finish = deferred<string>();
    const { tool, seen } = scripted(
      () => {
        started.resolve();
        return finish.promise;
      },
      { timeoutMs: null },
    );
    const running = h.exec(tool, { n: 1 });
    await started.promise;
    assert.equal(h.clock.pendingTimers, 0);
    const ctx = seen[0] as ToolContext;
    assert.equal(ctx.deadline, undefined);
    assert.equal(ctx.timeoutMs, undefined);
    h.clock.advance(10 * 60_000);
    finish.resolve('late but fine');
    assert.equal((await running).status, 'ok');
  });

  it("the run's deadline caps the call's deadline", async () => {
    const start = new ManualClock().now();
    const h = harness(start + 40);
    const { tool, seen } = scripted(() => 'ok', { timeoutMs: 100 });
    await h.exec(tool, { n: 1 });
    const ctx = seen[0] as ToolContext;
    assert.equal(ctx.deadline, start + 40);
    assert.equal(ctx.timeoutMs, 40);
  });
});

describe('executeTool: cancellation', () => {
  it('a run already cancelled never invokes the tool', async () => {
    const h = harness();
    h.source.cancel('user');
    const { tool, seen } = scripted(() => 'ran');
    const result = failed(await h.exec(tool, { n: 1 }));
    assert.equal(result.kind, 'cancelled');
    assert.ok(result.error instanceof CancelledError);
    assert.equal((result.error as CancelledError).reason, 'user');
    assert.equal(result.attempts, 0);
    assert.equal(seen.length, 0);
  });

  it('cancelling the run while the tool awaits ends the call with a CancelledError and no retry', async () => {
    const h = harness();
    const started = deferred();
    const { tool, seen } = scripted(
      () => {
        started.resolve();
        return new Promise(() => {});
      },
      { retries: 3, timeoutMs: 1_000 },
    );
    const running = h.exec(tool, { n: 1 });
    await started.promise;
    const ctx = seen[0] as ToolContext;
    h.source.cancel('shutdown');
    assert.equal(ctx.signal.aborted, true);
    assert.equal(ctx.isCancelled(), true);
    assert.throws(() => ctx.throwIfCancelled(), CancelledError);
    const result = failed(await running);
    assert.equal(result.kind, 'cancelled');
    assert.ok(result.error instanceof CancelledError);
    assert.equal((result.error as CancelledError).reason, 'shutdown', "the run's reason, not the call's 'parent'");
    assert.equal(seen.length, 1);
    assert.equal(h.clock.pendingTimers, 0, 'the timeout timer is cleared');
  });

  it('a tool that throws after the run was cancelled is cancelled, not retried', async () => {
    const h = harness();
    const { tool, seen } = scripted(
      () => {
        h.source.cancel('user');
        throw new Error('noticed');
      },
      { retries: 3 },
    );
    const result = failed(await h.exec(tool, { n: 1 }));
    assert.equal(result.kind, 'cancelled');
    assert.equal(seen.length, 1);
  });

  it('a tool throwing CancelledError is not retried', async () => {
    const h = harness();
    const { tool, seen } = scripted(
      () => {
        throw new CancelledError('parent', 'sub-call cancelled');
      },
      { retries: 3 },
    );
    const result = failed(await h.exec(tool, { n: 1 }));
    assert.equal(result.kind, 'cancelled');
    assert.equal(result.error.message, 'sub-call cancelled');
    assert.equal(seen.length, 1);
  });

  it('a run cancelled while the approval handler decides never invokes the tool', async () => {
    const h = harness();
    const { tool, seen } = scripted(() => 'ran', { requiresApproval: true });
    const result = failed(
      await h.exec(
        tool,
        { n: 1 },
        {
          approval: () => {
            h.source.cancel('user');
            return { decision: 'approve' };
          },
        },
      ),
    );
    assert.equal(result.kind, 'cancelled');
    assert.equal((result.error as CancelledError).reason, 'user');
    assert.equal(seen.length, 0);
  });

  it('a run cancelled between attempts stops retrying', async () => {
    const h = harness();
    const { tool, seen } = scripted(
      () => {
        throw new Error('fail');
      },
      { retries: 3 },
    );
    h.events.on('tool.execute.exception', (e) => {
      if (e.willRetry) h.source.cancel('user');
    });
    const result = failed(await h.exec(tool, { n: 1 }));
    assert.equal(result.kind, 'cancelled');
    assert.equal(seen.length, 1);
  });

  it('cancelling after completion has no effect on the result', async () => {
    const h = harness();
    const { tool, seen } = scripted(() => 'done');
    const result = await h.exec(tool, { n: 1 });
    h.source.cancel('user');
    assert.ok(result.status === 'ok' && result.value === 'done');
    assert.equal((seen[0] as ToolContext).isCancelled(), false, 'a finished call is detached from the run');
  });
});

describe('executeTool: telemetry', () => {
  it('start and stop, with durationMs from the clock', async () => {
    const h = harness();
    const started = deferred();
    const finish = deferred<string>();
    const { tool } = scripted(() => {
      started.resolve();
      return finish.promise;
    });
    const running = h.exec(tool, { n: 1 });
    await started.promise;
    h.clock.advance(25);
    finish.resolve('ok');
    await running;
    assert.deepEqual(kinds(h.log), ['tool.execute.start', 'tool.execute.stop']);
    const start = payload(h.log, 'tool.execute.start');
    const stop = payload(h.log, 'tool.execute.stop');
    assert.equal(start.toolName, 'scripted');
    assert.equal(start.agentId, agentId);
    assert.equal(start.attempt, 1);
    assert.equal(stop.toolCallId, start.toolCallId);
    assert.equal(stop.durationMs, 25);
    assert.equal(stop.status, 'ok');
  });

  it('one start per attempt; exception carries attempt, willRetry, kind, raw reason and stack', async () => {
    const h = harness();
    const secret = new Error('token sk-123 rejected');
    const { tool } = scripted(
      () => {
        throw secret;
      },
      { retries: 1 },
    );
    await h.exec(tool, { n: 1 });
    assert.deepEqual(kinds(h.log), [
      'tool.execute.start',
      'tool.execute.exception',
      'tool.execute.start',
      'tool.execute.exception',
      'tool.execute.stop',
    ]);
    const exceptions = payloads(h.log, 'tool.execute.exception');
    assert.deepEqual(
      exceptions.map((e) => [e.attempt, e.willRetry, e.kind]),
      [
        [1, true, 'thrown'],
        [2, false, 'thrown'],
      ],
    );
    for (const e of exceptions) {
      assert.equal(e.reason, secret, 'the raw reason');
      assert.equal(e.stack, secret.stack, 'the raw stack');
    }
    const stop = payload(h.log, 'tool.execute.stop');
    assert.equal(stop.status, 'error');
    assert.equal(stop.attempt, 2);
  });

  it('scrub strips reason and stack, keeping name and code', async () => {
    const h = harness();
    const { tool } = scripted(
      () => {
        throw new TroupeError('secret sk-123', { code: 'ERR_TOOL_FAILED' });
      },
      { retries: 0 },
    );
    await h.exec(tool, { n: 1 });
    const raw = payload(h.log, 'tool.execute.exception');
    const clean = scrub(raw);
    assert.equal(clean.reason, undefined);
    assert.equal(clean.stack, undefined);
    assert.equal(clean.errorName, 'TroupeError');
    assert.equal(clean.errorCode, 'ERR_TOOL_FAILED');
    assert.equal(clean.kind, 'thrown');
    assert.equal(clean.attempt, 1);
    assert.doesNotMatch(JSON.stringify(clean), /sk-123/);
    assert.equal(raw.stack !== undefined && /sk-123/.test(raw.stack), true, 'scrub did not change the original');
  });

  it('without listeners nothing is emitted and the result is the same', async () => {
    const h = harness();
    h.events.removeAllListeners();
    const { tool } = scripted(() => 'fine');
    const result = await h.exec(tool, { n: 1 });
    assert.equal(result.status, 'ok');
    assert.equal(h.log.length, 0);
  });

  it('works without an event sink', async () => {
    const h = harness();
    const { tool } = scripted(
      () => {
        throw new Error('x');
      },
      { retries: 0 },
    );
    const result = await h.exec(tool, { n: 1 }, { events: undefined });
    assert.equal(result.status, 'error');
  });
});

describe('executeTool: the context the tool sees', () => {
  it('carries the channels and identities', async () => {
    const h = harness();
    const { tool, seen } = scripted(() => 'ok');
    await h.exec(tool, { n: 1 });
    const ctx = seen[0] as ToolContext<unknown, { requestId?: unknown }>;
    assert.equal(ctx.agentId, agentId);
    assert.equal(ctx.parentAgentId, parentAgentId);
    assert.deepEqual(ctx.scope, { userId: 'u1' });
    assert.equal(ctx.requestId, 'req-1');
    assert.deepEqual(ctx.toolContext, { requestId: 'req-1' });
    assert.equal(ctx.state.metadata.title, 'chat');
    assert.equal(ctx.toolName, 'scripted');
    assert.equal(ctx.answer, undefined);
  });

  it('each attempt gets a fresh call token: a retry is not born cancelled', async () => {
    const h = harness();
    const { tool, seen } = scripted(
      (attempt, ctx) => {
        if (attempt === 1) {
          assert.equal(ctx.isCancelled(), false);
          throw new Error('retry me');
        }
        return ctx.isCancelled();
      },
      { retries: 1 },
    );
    const result = await h.exec(tool, { n: 1 });
    assert.ok(result.status === 'ok' && result.value === false);
    assert.notEqual(seen[0]?.signal, seen[1]?.signal);
  });
});

describe('executeTool: the cancel race keeps nothing of a settled call', () => {
  it('an async call’s result is collectable while its run goes on (the run token’s promise holds only a cell)', async () => {
    // gc() for this test alone, without a flag on the whole test run.
    const { setFlagsFromString } = await import('node:v8');
    const { runInNewContext } = await import('node:vm');
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const h = harness();
    let ref: WeakRef<object> | undefined;
    const { tool } = scripted(async () => {
      const big = { payload: new Array(1000).fill('x') };
      ref = new WeakRef(big);
      return big;
    });
    const result = await h.exec(tool, { n: 1 });
    assert.equal(result.status, 'ok');
    // Drop every reference this test holds; the run (h.source) stays alive and uncancelled.
    (result as { value?: unknown }).value = undefined;
    // Two task boundaries, so the WeakRef made in an earlier job may be cleared.
    await afterWakeups();
    gc();
    await afterWakeups();
    gc();
    assert.ok(ref !== undefined);
    assert.equal(ref.deref(), undefined, 'the settled call’s value was kept alive by the run’s cancellation promise');
    assert.equal(h.source.isCancelled(), false);
  });
});
