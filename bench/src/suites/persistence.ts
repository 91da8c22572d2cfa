import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AgentId, LoopState, Message } from '@troupe/core';
import { sqlitePersistence } from '@troupe/sqlite';
import {
  type AgentStateEnvelope,
  MemoryPersistence,
  type PersistenceAdapter,
  type PersistenceContext,
  type RequestOpening,
  type RunRecord,
  STATE_ENVELOPE_VERSION,
} from '@troupe/supervisor';
import type { Figure, Suite } from '../Suite.js';
import { nowNs, quantile, round } from '../stats.js';

const MiB = 1024 * 1024;
const scope = Object.freeze({ tenant: 'bench' });
const tenantKey = (s: unknown) => (s as { tenant: string }).tenant;

function gc(): void {
  (globalThis as { gc?: () => void }).gc?.();
}

function ctx(i: number): PersistenceContext {
  return { agentId: `agent-${i}` as AgentId, conversationId: `conversation-${i}` };
}

/** A loop state of about `bytes` of JSON: a conversation's messages and some metadata. */
function loopState(agentId: string, bytes: number, messages = 10): LoopState {
  const perMessage = Math.max(1, Math.floor(bytes / messages) - 40);
  const list: Message[] = Array.from({ length: messages }, (_, i) => ({
    role: i % 2 === 0 ? 'user' : 'assistant',
    content: `${i}:`.padEnd(perMessage, 'lorem ipsum dolor sit amet '),
  }));
  return {
    agentId: agentId as AgentId,
    messages: list,
    todos: [],
    metadata: { customer: 'A-17', notes: ['called twice'] },
    updates: [],
    events: [],
    turns: messages / 2,
    usage: { inputTokens: 1200, outputTokens: 300 },
    failedTurns: 0,
    pending: undefined,
  };
}

function envelope(c: PersistenceContext, state: LoopState, savedAt: number, suspended = false): AgentStateEnvelope {
  return {
    version: STATE_ENVELOPE_VERSION,
    agentId: c.agentId,
    conversationId: c.conversationId,
    agentName: 'bench',
    status: suspended ? 'suspended' : 'idle',
    state,
    pendingRequest: undefined,
    waitingOn: suspended ? `request-${c.conversationId}` : undefined,
    runId: `run-${c.conversationId}`,
    childCounter: 0,
    savedAt,
  };
}

function runRow(c: PersistenceContext, status: RunRecord['status'], at: number, state?: LoopState): RunRecord {
  return {
    runId: `run-${c.conversationId}`,
    conversationId: c.conversationId,
    agentId: c.agentId,
    agentName: 'bench',
    kind: 'message',
    status,
    attempt: 1,
    state,
    usage: { inputTokens: 100, outputTokens: 20 },
    totalUsage: { inputTokens: 100, outputTokens: 20 },
    updatedAt: at,
  };
}

function requestRow(c: PersistenceContext, at: number): RequestOpening {
  return {
    requestId: `request-${c.conversationId}`,
    conversationId: c.conversationId,
    agentId: c.agentId,
    runId: `run-${c.conversationId}`,
    runAgentId: c.agentId,
    path: [c.agentId],
    request: { id: 'ask', kind: 'approval', prompt: 'Refund 20 EUR?' },
    localId: 'ask',
    toolCallId: 'call-1',
    approval: true,
    openedAt: at,
  };
}

function tempFile(label: string): { file: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), `troupe-bench-${label}-`));
  return { file: join(dir, 'troupe.sqlite'), remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** p50/p99 of one turn commit: a 10 KB state, its two new messages and its run row, one transaction. */
async function turnLatency(store: PersistenceAdapter, turns: number): Promise<number[]> {
  const conversations = 100;
  const states = Array.from({ length: conversations }, (_, i) => loopState(ctx(i).agentId, 10 * 1024));
  const samples: number[] = [];
  for (let t = 0; t < turns + 500; t++) {
    const i = t % conversations;
    const c = ctx(i);
    const batch = {
      envelope: envelope(c, states[i] as LoopState, t),
      messages: [
        { role: 'user', content: 'and the invoice?' },
        { role: 'assistant', content: 'sent again' },
      ] satisfies Message[],
      runs: [runRow(c, 'done', t)],
    };
    const start = nowNs();
    await store.commit(scope, batch, c);
    if (t >= 500) samples.push((nowNs() - start) / 1000);
  }
  return samples;
}

async function saveMessageRate(store: PersistenceAdapter, count: number): Promise<number> {
  const message: Message = { role: 'assistant', content: 'a reply of a typical length, about eighty characters long.' };
  for (let i = 0; i < 1000; i++) await store.saveMessage(scope, message, ctx(i % 50));
  const start = nowNs();
  for (let i = 0; i < count; i++) await store.saveMessage(scope, message, ctx(i % 50));
  return count / ((nowNs() - start) / 1e9);
}

/** Write `n` suspended conversations, close, reopen, and load each one's state, live runs and request. */
async function loadSuspended(n: number): Promise<{ ms: number; openMs: number }> {
  const tmp = tempFile('restore');
  try {
    const writer = sqlitePersistence({ file: tmp.file, tenantKey });
    for (let i = 0; i < n; i++) {
      const c = ctx(i);
      const state = loopState(c.agentId, 4 * 1024);
      await writer.commit(
        scope,
        {
          envelope: envelope(c, state, i, true),
          runs: [runRow(c, 'suspended', i, state)],
          openedRequests: [requestRow(c, i)],
        },
        c,
      );
    }
    await writer.close();
    const start = nowNs();
    const reader = sqlitePersistence({ file: tmp.file, tenantKey });
    const openMs = (nowNs() - start) / 1e6;
    await reader.markInterrupted();
    let loaded = 0;
    let after: string | undefined;
    do {
      const page = await reader.listRequests(scope, { limit: 1000, after });
      for (const r of page.items) {
        const c = { agentId: r.agentId, conversationId: r.conversationId };
        const [state, runs] = await Promise.all([reader.loadState(scope, c), reader.loadRuns(scope, c)]);
        if (state === undefined || runs.length !== 1) throw new Error(`restore lost ${r.conversationId}`);
        loaded++;
      }
      after = page.next;
    } while (after !== undefined);
    const ms = (nowNs() - start) / 1e6;
    await reader.close();
    if (loaded !== n) throw new Error(`restored ${loaded} of ${n}`);
    return { ms, openMs };
  } finally {
    tmp.remove();
  }
}

/** Heap held by a memory store per 1,000 idle conversations of 10 messages (state + display messages). */
async function memoryHeapPer1000(n: number): Promise<number> {
  const store = new MemoryPersistence({ maxConversations: n + 1 });
  gc();
  const before = process.memoryUsage().heapUsed;
  for (let i = 0; i < n; i++) {
    const c = ctx(i);
    const state = loopState(c.agentId, 1200);
    await store.commit(scope, { envelope: envelope(c, state, i), messages: [...state.messages] }, c);
  }
  gc();
  const held = process.memoryUsage().heapUsed - before;
  if (store.size !== n) throw new Error('conversations were dropped');
  await store.close();
  return held / MiB / (n / 1000);
}

/** RSS growth while `n` conversations are written and released (after a warm-up tenth). */
async function rssGrowth(store: PersistenceAdapter, n: number): Promise<number> {
  const state = loopState('agent', 2 * 1024);
  let mark = 0;
  for (let i = 0; i < n; i++) {
    if (i === Math.floor(n / 10)) {
      gc();
      mark = process.memoryUsage().rss;
    }
    const c = ctx(i);
    await store.commit(
      scope,
      { envelope: envelope(c, state, i), messages: [state.messages[1] as Message], runs: [runRow(c, 'done', i)] },
      c,
    );
    await store.release(scope, c);
  }
  gc();
  return (process.memoryUsage().rss - mark) / MiB;
}

/** The store side of issue 13's figures: turn commits, saveMessage rate, restore, memory. */
export const persistenceSuite: Suite = {
  name: 'persistence',
  description: 'SQLite turn commit p50/p99, saveMessage rate, loading 1,000 suspended runs, store memory',
  placementSensitive: false,
  inDefaultRun: true,
  async run({ quick, progress }) {
    const figures: Figure[] = [];
    const add = (name: string, value: number, unit: string, detail?: Figure['detail']) =>
      figures.push({
        suite: 'persistence',
        name,
        value: round(value),
        unit,
        ...(detail === undefined ? {} : { detail }),
      });

    progress('persistence: turn commit (SQLite, synchronous NORMAL)');
    const turns = quick ? 2_000 : 20_000;
    const tmp = tempFile('turn');
    try {
      const store = sqlitePersistence({ file: tmp.file, tenantKey });
      const sqlite = await turnLatency(store, turns);
      progress('persistence: saveMessage rate');
      const rate = await saveMessageRate(store, quick ? 20_000 : 100_000);
      await store.close();
      const memory = await turnLatency(new MemoryPersistence({ tenantKey }), turns);
      add('persistence.turn_p50_us', quantile(sqlite, 0.5), 'µs', {
        p90: round(quantile(sqlite, 0.9)),
        p999: round(quantile(sqlite, 0.999)),
        turns,
        memory_store_p50: round(quantile(memory, 0.5)),
      });
      add('persistence.turn_p99_us', quantile(sqlite, 0.99), 'µs', { memory_store_p99: round(quantile(memory, 0.99)) });
      add('persistence.save_message_per_s', rate, '/s');
    } finally {
      tmp.remove();
    }

    progress('persistence: loading 1,000 suspended runs from a reopened file');
    const restore = await loadSuspended(1000);
    add('persistence.store_load_1000_suspended_ms', restore.ms, 'ms', { open_ms: round(restore.openMs) });

    progress('persistence: memory store heap per 1,000 conversations');
    add('persistence.memory_store_heap_mib_per_1000', await memoryHeapPer1000(quick ? 2_000 : 10_000), 'MiB');

    const passing = quick ? 20_000 : 100_000;
    progress(`persistence: RSS while ${passing} conversations pass through`);
    add(
      'persistence.memory_store_rss_growth_mib_100k',
      await rssGrowth(new MemoryPersistence({ tenantKey, maxConversations: 1000 }), passing),
      'MiB',
      {
        conversations: passing,
      },
    );
    const rssFile = tempFile('rss');
    try {
      const store = sqlitePersistence({ file: rssFile.file, tenantKey });
      add('persistence.sqlite_store_rss_growth_mib_100k', await rssGrowth(store, passing), 'MiB', {
        conversations: passing,
      });
      await store.close();
    } finally {
      rssFile.remove();
    }
    return figures;
  },
};
