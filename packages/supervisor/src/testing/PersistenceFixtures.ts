import assert from 'node:assert/strict';
import { type AgentId, isTroupeError, type LoopState } from '@troupe/core';
import type {
  PersistenceAdapter,
  PersistenceContext,
  RequestOpening,
  RunRecord,
  TenantKey,
  ToolCallStart,
} from '../persistence/Persistence.js';
import { type AgentStateEnvelope, STATE_ENVELOPE_VERSION } from '../persistence/StateEnvelope.js';

/**
 * A store made for one contract test, and how to remove what it leaves behind.
 *
 * @example
 * ```ts
 * import { MemoryPersistence } from '@troupe/supervisor'
 *
 * const made: StoreUnderTest = { store: new MemoryPersistence(), cleanup: async () => {} }
 * ```
 */
export interface StoreUnderTest {
  readonly store: PersistenceAdapter;
  /** Remove what the store left behind (files, a database schema). Called after `close()`. */
  cleanup(): Promise<void>;
}

/**
 * Makes a fresh, empty store with the given options (a `tenantKey` to pass on to the store).
 *
 * @example
 * ```ts
 * import { MemoryPersistence } from '@troupe/supervisor'
 *
 * const make: MakeStore = async (options) => ({ store: new MemoryPersistence(options), cleanup: async () => {} })
 * runPersistenceContract('MemoryPersistence', make)
 * ```
 */
export type MakeStore = (options: { tenantKey?: TenantKey }) => Promise<StoreUnderTest>;

/**
 * A scope of the contract's tests: its tenant, and a secret that must never reach the store.
 *
 * @example
 * ```ts
 * const scope: TestScope = PersistenceFixtures.scopeOf('t1') // { tenant: 't1', tenantSecret: 'secret-t1-…' }
 * ```
 */
export interface TestScope {
  readonly tenant: string;
  readonly tenantSecret: string;
}

const tenantKey: TenantKey = (scope) => (scope as TestScope).tenant;

function scopeOf(tenant: string, secret = `secret-${tenant}-${Math.random().toString(36).slice(2)}`): TestScope {
  return Object.freeze({ tenant, tenantSecret: secret });
}

function ctx(conversationId: string, agentId = `agent-${conversationId}`): PersistenceContext {
  return { agentId: agentId as AgentId, conversationId };
}

function loopState(agentId: string, note = 'hello'): LoopState {
  return {
    agentId: agentId as AgentId,
    messages: [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: note },
    ],
    todos: [],
    metadata: { note, nested: { list: [1, 2, 3] } },
    updates: [],
    events: [],
    turns: 1,
    usage: { inputTokens: 10, outputTokens: 5 },
    failedTurns: 0,
    pending: undefined,
  };
}

function envelope(
  c: PersistenceContext,
  overrides: Partial<Omit<AgentStateEnvelope, 'version'>> = {},
): AgentStateEnvelope {
  return {
    version: STATE_ENVELOPE_VERSION,
    agentId: c.agentId,
    conversationId: c.conversationId,
    agentName: 'triage',
    status: 'idle',
    state: loopState(c.agentId),
    pendingRequest: undefined,
    waitingOn: undefined,
    runId: undefined,
    childCounter: 0,
    savedAt: 1_000,
    ...overrides,
  };
}

function run(c: PersistenceContext, runId: string, overrides: Partial<RunRecord> = {}): RunRecord {
  return {
    runId,
    conversationId: c.conversationId,
    agentId: c.agentId,
    agentName: 'triage',
    kind: 'message',
    status: 'running',
    attempt: 1,
    state: { step: 1 },
    usage: { inputTokens: 1, outputTokens: 1 },
    totalUsage: { inputTokens: 2, outputTokens: 2 },
    updatedAt: 1_000,
    ...overrides,
  };
}

function call(runId: string, toolCallId: string, overrides: Partial<ToolCallStart> = {}): ToolCallStart {
  return { runId, toolCallId, attempt: 1, toolName: 'charge', idempotent: false, startedAt: 1_000, ...overrides };
}

function request(c: PersistenceContext, requestId: string, overrides: Partial<RequestOpening> = {}): RequestOpening {
  return {
    requestId,
    conversationId: c.conversationId,
    agentId: c.agentId,
    runId: `run-${requestId}`,
    runAgentId: c.agentId,
    path: [c.agentId],
    request: { id: `local-${requestId}`, kind: 'input', prompt: 'Which account?' },
    localId: `local-${requestId}`,
    toolCallId: `call-${requestId}`,
    approval: false,
    openedAt: 1_000,
    ...overrides,
  };
}

/** Assert `promise` rejects with a Troupe error of `code` whose message matches `pattern`. */
async function rejectsWith(promise: Promise<unknown>, code: string, pattern?: RegExp): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(isTroupeError(error), `expected a TroupeError, got ${String(error)}`);
    assert.equal(error.code, code, error.message);
    if (pattern !== undefined) assert.match(error.message, pattern);
    return true;
  });
}

/** Open a store, run `fn` against it, then close it and remove what it left. */
async function withStore(
  make: MakeStore,
  fn: (store: PersistenceAdapter) => Promise<void>,
  options: { tenantKey?: TenantKey } = { tenantKey },
): Promise<void> {
  const { store, cleanup } = await make(options);
  try {
    await fn(store);
  } finally {
    await store.close?.();
    await cleanup();
  }
}

/**
 * The records the persistence contract saves, and its helpers, for tests of a store of one's own
 * beside {@link runPersistenceContract}: scopes with a secret (`scopeOf`) and the `tenantKey` that
 * reads them, a context (`ctx`), a loop state, an envelope, a run, a tool call and a request, each
 * valid and overridable; `rejectsWith(promise, code, pattern?)` asserts a typed rejection;
 * `withStore(make, fn)` opens a store, runs `fn`, closes it and cleans up.
 *
 * @example
 * ```ts
 * import { MemoryPersistence } from '@troupe/supervisor'
 *
 * const { ctx, envelope, run, scopeOf, rejectsWith } = PersistenceFixtures
 * const store = new MemoryPersistence({ tenantKey: PersistenceFixtures.tenantKey })
 * const c = ctx('c1')
 * await store.commit(scopeOf('t1'), { envelope: envelope(c), runs: [run(c, 'r1')] }, c)
 * await rejectsWith(store.commit(scopeOf('t1'), { runs: [run(c, 'r1', { attempt: 0 })] }, c), 'ERR_INVALID_ARGUMENT')
 * ```
 */
export const PersistenceFixtures = Object.freeze({
  tenantKey,
  scopeOf,
  ctx,
  loopState,
  envelope,
  run,
  call,
  request,
  rejectsWith,
  withStore,
});
