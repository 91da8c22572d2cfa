import assert from 'node:assert/strict';
import { type AgentId, isTroupeError, type LoopState } from '@troupe/core';
import {
  type AgentStateEnvelope,
  type PersistenceAdapter,
  type PersistenceContext,
  type RequestOpening,
  type RunRecord,
  STATE_ENVELOPE_VERSION,
  type TenantKey,
  type ToolCallStart,
} from '@troupe/supervisor';

/** What a contract test gets from the store under test. */
export interface StoreUnderTest {
  readonly store: PersistenceAdapter;
  /** Remove what the store left behind (files). Called after close. */
  cleanup(): Promise<void>;
}

/** Makes a fresh, empty store with the given options. */
export type MakeStore = (options: { tenantKey?: TenantKey }) => Promise<StoreUnderTest>;

/** Scopes carry their tenant and a secret that must never reach the store. */
export interface TestScope {
  readonly tenant: string;
  readonly tenantSecret: string;
}

export const tenantKey: TenantKey = (scope) => (scope as TestScope).tenant;

export function scopeOf(tenant: string, secret = `secret-${tenant}-${Math.random().toString(36).slice(2)}`): TestScope {
  return Object.freeze({ tenant, tenantSecret: secret });
}

export function ctx(conversationId: string, agentId = `agent-${conversationId}`): PersistenceContext {
  return { agentId: agentId as AgentId, conversationId };
}

export function loopState(agentId: string, note = 'hello'): LoopState {
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

export function envelope(
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

export function run(c: PersistenceContext, runId: string, overrides: Partial<RunRecord> = {}): RunRecord {
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

export function call(runId: string, toolCallId: string, overrides: Partial<ToolCallStart> = {}): ToolCallStart {
  return { runId, toolCallId, attempt: 1, toolName: 'charge', idempotent: false, startedAt: 1_000, ...overrides };
}

export function request(
  c: PersistenceContext,
  requestId: string,
  overrides: Partial<RequestOpening> = {},
): RequestOpening {
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
export async function rejectsWith(promise: Promise<unknown>, code: string, pattern?: RegExp): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(isTroupeError(error), `expected a TroupeError, got ${String(error)}`);
    assert.equal(error.code, code, error.message);
    if (pattern !== undefined) assert.match(error.message, pattern);
    return true;
  });
}
