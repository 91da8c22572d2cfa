import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  type AgentId,
  type AgentStateView,
  type Answer,
  CancelledError,
  CancelSource,
  createId,
  deepFreeze,
  RESERVED_CONTEXT_KEYS,
  sealScope,
} from '@troupe/core';
import { buildToolContext, type CallContext, type RunContext } from '@troupe/core/internal';

const agentId = 'agent_parent-sub-1' as AgentId;
const parentAgentId = 'agent_parent' as AgentId;
const scope = sealScope({ userId: 'u1', orgId: 'o1', role: 'admin' });

function state(metadata: Record<string, unknown> = { conversation_title: 'My Chat' }): AgentStateView {
  return {
    agentId,
    messages: [{ role: 'user', content: 'hi' }],
    todos: [{ id: 't1', text: 'write tests', status: 'pending' }],
    metadata: deepFreeze(metadata),
  };
}

function run(toolContext: Record<string, unknown>, over: Partial<RunContext> = {}): RunContext {
  return { scope, toolContext: deepFreeze(toolContext), agentId, parentAgentId, ...over };
}

function call(over: Partial<CallContext> = {}): CallContext {
  return {
    state: state(),
    toolCallId: createId('call'),
    toolName: 'search',
    attempt: 1,
    deadline: undefined,
    timeoutMs: undefined,
    answer: undefined,
    token: new CancelSource(),
    ...over,
  };
}

describe('buildToolContext: the three channels', () => {
  it('merges toolContext keys flat and keeps it whole under toolContext', () => {
    const tc = { feature_flags: { new_search: true }, tenant_name: 'Acme' };
    const r = run(tc);
    const ctx = buildToolContext(r, call());
    assert.deepEqual(ctx.feature_flags, { new_search: true });
    assert.equal(ctx.tenant_name, 'Acme');
    assert.equal(ctx.toolContext, r.toolContext, 'the very same object, for forwarding to children');
    assert.deepEqual(ctx.toolContext, tc);
  });

  it('puts scope at ctx.scope', () => {
    const ctx = buildToolContext(run({}), call());
    assert.equal(ctx.scope, scope);
  });

  it('nests state: agentId, messages, todos and metadata', () => {
    const s = state();
    const ctx = buildToolContext(run({}), call({ state: s }));
    assert.equal(ctx.state, s);
    assert.equal(ctx.state.agentId, agentId);
    assert.deepEqual(ctx.state.messages, [{ role: 'user', content: 'hi' }]);
    assert.equal(ctx.state.todos.length, 1);
    assert.equal(ctx.state.metadata.conversation_title, 'My Chat');
  });

  it('metadata is nested under state.metadata, never flat', () => {
    const ctx = buildToolContext(run({ tenant_name: 'Acme' }), call());
    assert.equal((ctx as Record<string, unknown>).conversation_title, undefined);
    assert.equal((ctx as Record<string, unknown>).metadata, undefined);
    assert.equal('conversation_title' in ctx, false);
    assert.equal(ctx.state.metadata.conversation_title, 'My Chat');
  });

  it('default metadata is {}', () => {
    const bare = { agentId, messages: [], todos: [] } as unknown as AgentStateView;
    const ctx = buildToolContext(run({}), call({ state: bare }));
    assert.deepEqual(ctx.state.metadata, {});
    assert.ok(Object.isFrozen(ctx.state.metadata));
    assert.equal(ctx.state.agentId, agentId);
  });

  it('exposes agentId and parentAgentId distinctly', () => {
    const ctx = buildToolContext(run({}), call());
    assert.equal(ctx.agentId, agentId);
    assert.equal(ctx.parentAgentId, parentAgentId);
    const top = buildToolContext(run({}, { parentAgentId: undefined }), call());
    assert.equal(top.parentAgentId, undefined);
  });

  it('carries the per-call fields', () => {
    const answer: Answer = { id: 'req_1', ok: true, data: { env: 'staging' } };
    const id = createId('call');
    const ctx = buildToolContext(
      run({}),
      call({ toolCallId: id, toolName: 'deploy', attempt: 2, deadline: 1_000, timeoutMs: 250, answer }),
    );
    assert.equal(ctx.toolCallId, id);
    assert.equal(ctx.toolName, 'deploy');
    assert.equal(ctx.attempt, 2);
    assert.equal(ctx.deadline, 1_000);
    assert.equal(ctx.timeoutMs, 250);
    assert.equal(ctx.answer, answer);
  });

  it('deadline, timeoutMs and answer may be unset', () => {
    const ctx = buildToolContext(run({}), call());
    assert.equal(ctx.deadline, undefined);
    assert.equal(ctx.timeoutMs, undefined);
    assert.equal(ctx.answer, undefined);
  });
});

describe('buildToolContext: reserved keys always win', () => {
  it('internal keys win over a caller state and agentId', () => {
    const ctx = buildToolContext(
      run({ state: 'caller state', agentId: 'impostor', tenant_name: 'Acme' }),
      call({ state: state({ k: 1 }) }),
    );
    assert.equal(ctx.agentId, agentId);
    assert.deepEqual(ctx.state.metadata, { k: 1 });
    assert.equal(ctx.tenant_name, 'Acme');
    // The caller's values stay reachable, whole, under toolContext.
    assert.equal(ctx.toolContext.state, 'caller state');
    assert.equal(ctx.toolContext.agentId, 'impostor');
  });

  it('scope in toolContext is overridden by the scope channel', () => {
    const ctx = buildToolContext(run({ scope: { userId: 'attacker' } }), call());
    assert.equal(ctx.scope, scope);
  });

  it('every reserved key wins over a same-named toolContext key', () => {
    const tc: Record<string, unknown> = { plain: 'kept' };
    for (const key of RESERVED_CONTEXT_KEYS) tc[key] = `caller:${key}`;
    const token = new CancelSource();
    const ctx = buildToolContext(run(tc), call({ token, attempt: 3 })) as unknown as Record<string, unknown>;
    for (const key of RESERVED_CONTEXT_KEYS) {
      assert.notEqual(ctx[key], `caller:${key}`, `${key} must be the library's`);
    }
    assert.equal(ctx.plain, 'kept');
    assert.ok(ctx.signal instanceof AbortSignal);
    assert.equal(typeof ctx.isCancelled, 'function');
    assert.equal(ctx.attempt, 3);
    assert.ok(RESERVED_CONTEXT_KEYS.includes('parentAgentId'));
    assert.ok(RESERVED_CONTEXT_KEYS.includes('toolContext'));
  });

  it('contexts of different runs do not share flat keys', () => {
    const a = buildToolContext(run({ tenant_name: 'Acme' }), call());
    const b = buildToolContext(run({ tenant_name: 'Globex', only_b: true }), call());
    assert.equal(a.tenant_name, 'Acme');
    assert.equal(b.tenant_name, 'Globex');
    assert.equal(a.only_b, undefined);
  });

  it('calls of one run share the toolContext but not the per-call fields', () => {
    const r = run({ tenant_name: 'Acme' });
    const one = buildToolContext(r, call({ attempt: 1, toolName: 'a' }));
    const two = buildToolContext(r, call({ attempt: 2, toolName: 'b' }));
    assert.deepEqual([one.attempt, one.toolName, two.attempt, two.toolName], [1, 'a', 2, 'b']);
    assert.equal(one.tenant_name, two.tenant_name);
  });

  it('an unfrozen toolContext is re-read on every call', () => {
    const tc: Record<string, unknown> = { flag: 'one' };
    const r: RunContext = { scope, toolContext: tc, agentId, parentAgentId };
    assert.equal(buildToolContext(r, call()).flag, 'one');
    tc.flag = 'two';
    assert.equal(buildToolContext(r, call()).flag, 'two');
  });

  it('own enumerable keys are the reserved ones; flat keys are inherited (documented)', () => {
    const ctx = buildToolContext(run({ tenant_name: 'Acme' }), call());
    const own = Object.keys(ctx);
    for (const key of own) assert.ok((RESERVED_CONTEXT_KEYS as readonly string[]).includes(key), key);
    assert.equal(Object.hasOwn(ctx, 'tenant_name'), false);
    assert.ok('tenant_name' in ctx);
    assert.ok(Object.getOwnPropertySymbols(ctx).length === 0, 'the token is not reachable by reflection');
  });

  it('flat keys cannot be overwritten through the context', () => {
    const ctx = buildToolContext(run({ tenant_name: 'Acme' }), call()) as unknown as Record<string, unknown>;
    assert.throws(() => {
      ctx.tenant_name = 'Evil';
    }, TypeError);
    assert.equal(buildToolContext(run({ tenant_name: 'Acme' }), call()).tenant_name, 'Acme');
  });
});

describe('buildToolContext: cancellation', () => {
  it('isCancelled, throwIfCancelled and signal read the call token', () => {
    const token = new CancelSource();
    const ctx = buildToolContext(run({}), call({ token }));
    assert.equal(ctx.isCancelled(), false);
    assert.doesNotThrow(() => ctx.throwIfCancelled());
    assert.equal(ctx.signal.aborted, false);
    token.cancel('user');
    assert.equal(ctx.isCancelled(), true);
    assert.throws(
      () => ctx.throwIfCancelled(),
      (e: unknown) => e instanceof CancelledError && e.reason === 'user',
    );
    assert.equal(ctx.signal.aborted, true);
    assert.ok(ctx.signal.reason instanceof CancelledError);
  });

  it('methods work when destructured', () => {
    const token = new CancelSource();
    const { isCancelled, throwIfCancelled } = buildToolContext(run({}), call({ token }));
    token.cancel('deadline');
    assert.equal(isCancelled(), true);
    assert.throws(() => throwIfCancelled(), { code: 'ERR_CANCELLED' });
  });

  it('each context reads its own token', () => {
    const a = new CancelSource();
    const b = new CancelSource();
    const r = run({});
    const ca = buildToolContext(r, call({ token: a }));
    const cb = buildToolContext(r, call({ token: b }));
    a.cancel('user');
    assert.equal(ca.isCancelled(), true);
    assert.equal(cb.isCancelled(), false);
    assert.equal(ca.signal.aborted, true);
    assert.equal(cb.signal.aborted, false);
  });
});
