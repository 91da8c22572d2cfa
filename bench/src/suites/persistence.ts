import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Agent, AgentId, LoopState, Message } from '@troupe/core';
import { sealMessage } from '@troupe/core/internal';
import { sqlitePersistence } from '@troupe/sqlite';
import {
  type AgentHandle,
  type AgentStateEnvelope,
  createSupervisor,
  MemoryPersistence,
  type PersistenceAdapter,
  type PersistenceContext,
  PersistenceRules,
  type RequestOpening,
  type RunRecord,
  STATE_ENVELOPE_VERSION,
} from '@troupe/supervisor';
import Database from 'better-sqlite3';
import { refundDesk, refundOffice } from '../agents/durable.js';
import { BenchInputError } from '../BenchInputError.js';
import type { Figure, SuiteBody } from '../Suite.js';
import { stringFlag } from '../SuiteFlags.js';
import { median, nowNs, quantile, round } from '../stats.js';
import { postgresFigures } from './persistencePostgres.js';

const MiB = 1024 * 1024;
const scope = Object.freeze({ tenant: 'bench' });
const tenantKey = (s: unknown) => (s as { tenant: string }).tenant;

function gc(): void {
  (globalThis as { gc?: () => void }).gc?.();
}

/**
 * GC until what is only weakly held is gone: a `WeakRef` target deref'd in the current job stays
 * alive until the job ends, and finalizers run after it, so a synchronous gc() alone keeps the
 * agents a supervisor lets go.
 */
async function settle(): Promise<void> {
  for (let i = 0; i < 3; i++) {
    gc();
    await new Promise((resolve) => setImmediate(resolve));
  }
  gc();
}

function ctx(i: number): PersistenceContext {
  return { agentId: `agent-${i}` as AgentId, conversationId: `conversation-${i}` };
}

/** A loop state of about `bytes` of JSON: a conversation's messages and some metadata. */
function loopState(agentId: string, bytes: number, messages = 10): LoopState {
  const perMessage = Math.max(1, Math.floor(bytes / messages) - 40);
  // Sealed as the agent loop appends them (text messages are frozen: a store writes each one once).
  const list: Message[] = Array.from({ length: messages }, (_, i) =>
    sealMessage({
      role: i % 2 === 0 ? 'user' : 'assistant',
      content: `${i}:`.padEnd(perMessage, 'lorem ipsum dolor sit amet '),
    }),
  );
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

/** The two messages of turn `t`, sealed as the agent loop appends them. */
function turnMessages(t: number): [Message, Message] {
  return [
    sealMessage({ role: 'user', content: `and the invoice? (${t})` }),
    sealMessage({ role: 'assistant', content: `sent again (${t})` }),
  ];
}

/**
 * p50/p99 of one turn commit: a state of 10 KB (with `grow`, it starts at 10 KB and gains the turn's
 * two messages, as a loop's state does), two new messages for display, and its run row, one
 * transaction — based on the revision the writer holds, as the supervisor saves (fenced).
 */
async function turnLatency(
  store: PersistenceAdapter,
  turns: number,
  grow: boolean,
): Promise<{ samples: number[]; stateBytes: number }> {
  const conversations = 100;
  const states = Array.from({ length: conversations }, (_, i) => loopState(ctx(i).agentId, 10 * 1024));
  const revisions = new Array<number>(conversations).fill(0);
  const samples: number[] = [];
  let last: AgentStateEnvelope | undefined;
  for (let t = 0; t < turns + 500; t++) {
    const i = t % conversations;
    const c = ctx(i);
    const said = turnMessages(t);
    const state = grow
      ? { ...(states[i] as LoopState), messages: [...(states[i] as LoopState).messages, ...said] }
      : (states[i] as LoopState);
    states[i] = state;
    last = envelope(c, state, t);
    const batch = { envelope: last, messages: said, runs: [runRow(c, 'done', t)], basedOn: (revisions[i] as number)++ };
    const start = nowNs();
    await store.commit(scope, batch, c);
    if (t >= 500) samples.push((nowNs() - start) / 1000);
  }
  return { samples, stateBytes: JSON.stringify(last).length };
}

/**
 * The floor under {@link turnLatency}: the SQL a turn commit runs — the conversation's upsert, the
 * state's (its messages apart: the fenced update of the rest, the messages it added appended to its
 * last chunk), two display messages appended to the transcript's last chunk, the run's fenced upsert —
 * in one immediate transaction, through better-sqlite3 directly, on a fresh file whose schema the store made (then closed), with every JSON text encoded
 * before the clock starts. What is left between the two is the store's own work: checking the
 * batch, JSON encoding (`JSON.stringify`), the checkpointer thread beside it.
 */
async function rawTurnLatency(turns: number, grow: boolean): Promise<number[]> {
  const tmp = tempFile('turn-raw');
  await sqlitePersistence({ file: tmp.file, tenantKey }).close();
  const db = new Database(tmp.file);
  try {
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    db.pragma('foreign_keys = ON');
    const conversation =
      db.prepare(`INSERT INTO conversations (tenant, conversation_id, agent_id, agent_name, status, updated_at)
       VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, conversation_id) DO UPDATE SET agent_id = excluded.agent_id,
         agent_name = excluded.agent_name, status = excluded.status, updated_at = excluded.updated_at`);
    // The fenced save: the first inserts, every later one updates the revision it is based on.
    const insertState =
      db.prepare(`INSERT INTO states (tenant, conversation_id, agent_id, version, json, writer, revision)
       VALUES (?, ?, ?, ?, ?, 'raw', 1) ON CONFLICT (tenant, conversation_id, agent_id) DO NOTHING`);
    const updateState = db.prepare(`UPDATE states SET version = ?, json = ?, revision = revision + 1
       WHERE tenant = ? AND conversation_id = ? AND agent_id = ? AND revision = ? AND writer = 'raw'`);
    // A state's messages are chunked as a transcript's (below): into the last chunk, or the next.
    const appendStateMessages = db.prepare(`UPDATE state_messages SET json = json || @text, count = count + @count
       WHERE tenant = @tenant AND conversation_id = @conversation AND agent_id = @agent
         AND chunk = (SELECT max(chunk) FROM state_messages
           WHERE tenant = @tenant AND conversation_id = @conversation AND agent_id = @agent)
         AND octet_length(json) + octet_length(@text) <= 2048`);
    const addStateMessages =
      db.prepare(`INSERT INTO state_messages (tenant, conversation_id, agent_id, chunk, count, json)
       VALUES (@tenant, @conversation, @agent, coalesce((SELECT max(chunk) FROM state_messages
           WHERE tenant = @tenant AND conversation_id = @conversation AND agent_id = @agent), 0) + 1, @count, @text)`);
    // The transcript's append: into the agent's last chunk while it stays within 2 KiB, else a new chunk.
    const appendMessages = db.prepare(`UPDATE messages SET json = json || @text, count = count + @count
       WHERE tenant = @tenant AND conversation_id = @conversation AND agent_id = @agent
         AND chunk = (SELECT max(chunk) FROM messages
           WHERE tenant = @tenant AND conversation_id = @conversation AND agent_id = @agent)
         AND octet_length(json) + octet_length(@text) <= 2048`);
    const addMessages = db.prepare(`INSERT INTO messages (tenant, conversation_id, agent_id, chunk, count, json)
       VALUES (@tenant, @conversation, @agent, coalesce((SELECT max(chunk) FROM messages
           WHERE tenant = @tenant AND conversation_id = @conversation AND agent_id = @agent), 0) + 1, @count, @text)`);
    const run =
      db.prepare(`INSERT INTO runs (tenant, run_id, conversation_id, status, attempt, updated_at, owner_id, json)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, run_id) DO UPDATE SET status = excluded.status,
         attempt = excluded.attempt, updated_at = excluded.updated_at, owner_id = excluded.owner_id, json = excluded.json
       WHERE runs.conversation_id = excluded.conversation_id AND runs.attempt <= excluded.attempt`);
    const conversations = 100;
    const write = db.transaction(
      (
        c: PersistenceContext,
        t: number,
        shell: string,
        from: number,
        added: { count: number; text: string }[],
        said: string,
        runJson: string,
      ) => {
        conversation.run('bench', c.conversationId, c.agentId, 'bench', 'idle', t);
        const basedOn = Math.floor(t / conversations);
        if (basedOn === 0) insertState.run('bench', c.conversationId, c.agentId, STATE_ENVELOPE_VERSION, shell);
        else updateState.run(STATE_ENVELOPE_VERSION, shell, 'bench', c.conversationId, c.agentId, basedOn);
        for (let k = 0; k < added.length; k++) {
          const chunk = { tenant: 'bench', conversation: c.conversationId, agent: c.agentId, ...added[k] };
          if (k > 0 || from === 0 || appendStateMessages.run(chunk).changes !== 1) addStateMessages.run(chunk);
        }
        const row = { tenant: 'bench', conversation: c.conversationId, agent: c.agentId, count: 2, text: said };
        if (appendMessages.run(row).changes !== 1) addMessages.run(row);
        run.run('bench', `run-${c.conversationId}`, c.conversationId, 'done', 1, t, 'bench-raw', runJson);
      },
    );
    const states = Array.from({ length: conversations }, (_, i) => loopState(ctx(i).agentId, 10 * 1024));
    const samples: number[] = [];
    for (let t = 0; t < turns + 500; t++) {
      const i = t % conversations;
      const c = ctx(i);
      const said = turnMessages(t);
      const before = (states[i] as LoopState).messages.length;
      const state = grow
        ? { ...(states[i] as LoopState), messages: [...(states[i] as LoopState).messages, ...said] }
        : (states[i] as LoopState);
      states[i] = state;
      const from = t < conversations ? 0 : before;
      const parts = PersistenceRules.encodeStateParts(envelope(c, state, t), 'envelope', from);
      if (parts === undefined) throw new Error('the bench state cannot be split');
      const runJson = JSON.stringify(runRow(c, 'done', t));
      const saidJson = said.map((m) => `${JSON.stringify(m)}\n`).join('');
      const start = nowNs();
      write.immediate(c, t, parts.shell, from, chunked(parts.messages), saidJson, runJson);
      if (t >= 500) samples.push((nowNs() - start) / 1000);
      // The store's checkpointer keeps its WAL short; here the writer does, between samples.
      if (t % 2000 === 1999) db.pragma('wal_checkpoint(PASSIVE)');
    }
    return samples;
  } finally {
    db.close();
    tmp.remove();
  }
}

/** JSON texts in groups of at most 2 KiB of lines (a longer one alone), as the store chunks them. */
function chunked(texts: readonly string[]): { count: number; text: string }[] {
  const out: { count: number; text: string }[] = [];
  let group: string[] = [];
  let bytes = 0;
  for (const t of texts) {
    const size = Buffer.byteLength(t) + 1;
    if (group.length > 0 && bytes + size > 2048) {
      out.push({ count: group.length, text: `${group.join('\n')}\n` });
      group = [];
      bytes = 0;
    }
    group.push(t);
    bytes += size;
  }
  if (group.length > 0) out.push({ count: group.length, text: `${group.join('\n')}\n` });
  return out;
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

// ---- The supervisor side: what a daemon on SQLite restores and keeps resident ----

/** A supervisor on the SQLite file, as a daemon runs one (two threads; only the nested agents use them). */
function supervisorOn(file: string, agent: Agent, maxIdleAgents: number) {
  return createSupervisor({
    agents: [agent],
    persistence: sqlitePersistence({ file, tenantKey }),
    pool: { threads: 2 },
    maxIdleAgents,
  });
}

interface RestoreResult {
  /** Open the file, create the supervisor, list the open requests, startAgent each: all suspended (each run). */
  readonly samplesMs: readonly number[];
  /** Of the first run: listing the open requests (pages of 1,000). */
  readonly listMs: number;
  /** Writing the n suspensions (not timed in the figure). */
  readonly setupMs: number;
  /** A last supervisor: answer `answered` requests with `answer(id, …, { scope })` (restore + answer + finish). */
  readonly answerDrivenMs: number;
  readonly answered: number;
}

/**
 * `n` conversations of `agent`, each suspended on a question (its own tool's, or one two levels
 * down), written by one supervisor that is then closed. `runs` times a new supervisor on the file
 * restores all of them (timed: store open → every handle suspended with its question open) and is
 * closed again; the last run answers a sample of 10, which must finish. A last supervisor then
 * answers `answerDriven` more straight from the store, nothing started by hand.
 */
async function restoreSuspended(
  agent: Agent,
  n: number,
  prompt: string,
  runs: number,
  answerDriven: number,
): Promise<RestoreResult> {
  const tmp = tempFile('restore-supervisor');
  try {
    const writer = supervisorOn(tmp.file, agent, n);
    const t0 = nowNs();
    for (let i = 0; i < n; i++) {
      const handle = await writer.startAgent(agent, { scope, agentId: `c-${i}` });
      const reply = await handle.send('refund please');
      if (reply.status !== 'suspended') throw new Error(`conversation ${i} did not suspend: ${reply.status}`);
    }
    const setupMs = (nowNs() - t0) / 1e6;
    await writer.close();

    const samplesMs: number[] = [];
    let listMs = 0;
    for (let run = 0; run < runs; run++) {
      await settle();
      const start = nowNs();
      const reader = supervisorOn(tmp.file, agent, n);
      const handles: AgentHandle[] = [];
      let listNs = 0;
      let after: string | undefined;
      do {
        const l0 = nowNs();
        const page = await reader.listRequests(scope, { limit: 1000, after });
        listNs += nowNs() - l0;
        for (const r of page.items) {
          const handle = await reader.startAgent(agent, {
            scope,
            agentId: r.agentId,
            conversationId: r.conversationId ?? r.agentId,
          });
          if (handle.status !== 'suspended') throw new Error(`${r.agentId} came back ${handle.status}`);
          handles.push(handle);
        }
        after = page.next;
      } while (after !== undefined);
      samplesMs.push((nowNs() - start) / 1e6);
      if (run === 0) listMs = listNs / 1e6;
      const open = reader.pendingRequests();
      if (handles.length !== n || open.length !== n) {
        throw new Error(`restored ${handles.length} of ${n}, ${open.length} questions open`);
      }
      if (open.some((r) => r.request.prompt !== prompt)) throw new Error('a restored question is not the one asked');
      if (run === runs - 1) {
        // Answerable: a sample of 10, spread over the set, finishes.
        for (let k = 0; k < 10; k++) {
          const request = open[Math.floor((k * n) / 10)]?.request;
          const reply = await reader.answer(request?.id as string, { ok: true });
          if (reply.status !== 'done' || !reply.text.includes('refunded 20')) {
            throw new Error(`answering ${request?.id} after the restore: ${JSON.stringify(reply)}`);
          }
        }
      }
      await reader.close();
    }

    // Answer-driven: nothing started by hand, each answer restores its conversation from the store.
    const last = supervisorOn(tmp.file, agent, n);
    const page = await last.listRequests(scope, { limit: 1000 });
    if (page.items.length !== Math.min(1000, n - 10)) throw new Error(`${page.items.length} requests left open`);
    const a0 = nowNs();
    let answered = 0;
    for (const r of page.items.slice(0, answerDriven)) {
      const reply = await last.answer(r.request.id, { ok: true }, { scope });
      if (reply.status !== 'done') throw new Error(`answer-driven restore of ${r.agentId}: ${reply.status}`);
      answered++;
    }
    const answerDrivenMs = (nowNs() - a0) / 1e6;
    await last.close();
    return { samplesMs, listMs, setupMs, answerDrivenMs, answered };
  } finally {
    tmp.remove();
  }
}

interface IdleHeap {
  readonly perThousandMiB: number;
  /** The same n agents with no message yet (the fixed cost of a resident agent). */
  readonly emptyPerThousandMiB: number;
  /** The n transcripts alone, as plain message objects (no supervisor). */
  readonly messagesPerThousandMiB: number;
  /** What one conversation's state holds. */
  readonly messages: number;
  readonly events: number;
  readonly stateJsonBytes: number;
  readonly eventsJsonBytes: number;
}

/** Where the idle-heap figures keep their conversations. */
type IdleStore = 'sqlite' | 'memory' | 'none';

/**
 * Heap per 1,000 idle resident conversations of 10 messages (5 sends, 5 replies), handles held by
 * the host, with conversations saved to `store` (`none`: `persistence: null`). Every supervisor is
 * made, filled, measured and closed before the next figure's window opens.
 */
async function idleHeap(n: number, store: IdleStore): Promise<IdleHeap> {
  const tmp = tempFile('idle-heap');
  try {
    const supervisor = createSupervisor({
      agents: [refundDesk],
      persistence:
        store === 'sqlite'
          ? sqlitePersistence({ file: tmp.file, tenantKey })
          : store === 'memory'
            ? new MemoryPersistence({ tenantKey, maxConversations: 2 * n + 500 })
            : null,
      pool: { threads: 2 },
      maxIdleAgents: 2 * n + 200,
    });
    const converse = async (id: string, sends: number): Promise<AgentHandle> => {
      const handle = await supervisor.startAgent(refundDesk, { scope, agentId: id });
      for (let m = 0; m < sends; m++) {
        const reply = await handle.send(`message ${m}`);
        if (reply.status !== 'done') throw new Error(`${id}: ${reply.status}`);
      }
      return handle;
    };
    // Warm: statements, shapes, the store's caches.
    const warm: AgentHandle[] = [];
    for (let i = 0; i < 100; i++) warm.push(await converse(`warm-${i}`, 5));

    const measure = async (prefix: string, sends: number): Promise<{ mib: number; held: AgentHandle[] }> => {
      await settle();
      const before = process.memoryUsage().heapUsed;
      const held: AgentHandle[] = [];
      for (let i = 0; i < n; i++) held.push(await converse(`${prefix}-${i}`, sends));
      await settle();
      const mib = (process.memoryUsage().heapUsed - before) / MiB / (n / 1000);
      if (supervisor.stats().agents < n) throw new Error('agents were let go: the figure would not be resident');
      return { mib, held };
    };
    const empty = await measure('empty', 0);
    for (const h of empty.held) await supervisor.stopAgent(h.id);
    empty.held.length = 0;
    const full = await measure('c', 5);
    const snap = full.held[0]?.snapshot();
    if (snap === undefined || snap.messages.filter((m) => m.role !== 'system').length !== 10) {
      throw new Error(`a conversation holds ${snap?.messages.length} messages, not 10`);
    }
    const stateJsonBytes = JSON.stringify({ ...snap, pendingRequest: undefined }).length;
    const eventsJsonBytes = JSON.stringify(snap.events).length;
    // Stopped before close: a closed supervisor stays reachable for piscina's close timeout (30 s)
    // and would hold its idle agents that long, inside the next figure's window.
    for (const h of [...warm, ...full.held]) await supervisor.stopAgent(h.id);
    await supervisor.close();
    if (warm.length + full.held.length === 0) throw new Error('unreachable');

    // The transcripts alone: the same messages as plain objects, one array per conversation.
    await settle();
    const before = process.memoryUsage().heapUsed;
    const transcripts = Array.from({ length: n }, (_, i) =>
      snap.messages.map((m) => ({ ...m, content: `${m.content}`.replace(/\d+/, String(i)) })),
    );
    await settle();
    const messagesPerThousandMiB = (process.memoryUsage().heapUsed - before) / MiB / (n / 1000);
    if (transcripts.length !== n) throw new Error('unreachable');
    return {
      perThousandMiB: full.mib,
      emptyPerThousandMiB: empty.mib,
      messagesPerThousandMiB,
      messages: snap.messages.length,
      events: snap.events.length,
      stateJsonBytes,
      eventsJsonBytes,
    };
  } finally {
    tmp.remove();
  }
}

/**
 * RSS while `n` conversations pass through a supervisor on SQLite — start, one message, let go
 * (the host drops the handle; idle agents past `maxIdleAgents` are held only weakly) — from the
 * `from`th to the last, after {@link settle} at both ends. The first ~10,000 warm the process up
 * (V8 sizes its heap, SQLite its caches), so the mark is there. Also the heap over the same stretch.
 */
async function supervisorRssGrowth(n: number, from: number, progress: (m: string) => void) {
  const tmp = tempFile('rss-supervisor');
  try {
    const supervisor = supervisorOn(tmp.file, refundDesk, 100);
    const samples: number[] = [];
    let heapMark = 0;
    let rssMark = 0;
    const every = Math.floor((n - from) / 9);
    let t0 = 0;
    for (let i = 0; i < n; i++) {
      if (i === from) {
        await settle();
        rssMark = process.memoryUsage().rss;
        heapMark = process.memoryUsage().heapUsed;
        t0 = nowNs();
      }
      if (i > from && (i - from) % every === 0) {
        await settle();
        samples.push(process.memoryUsage().rss / MiB);
        progress(`persistence: ${i} conversations through the supervisor, RSS ${round(samples.at(-1) ?? 0)} MiB`);
      }
      const handle = await supervisor.startAgent(refundDesk, { scope, agentId: `c-${i}` });
      const reply = await handle.send('hello');
      if (reply.status !== 'done') throw new Error(`conversation ${i}: ${reply.status}`);
    }
    const perConversationUs = (nowNs() - t0) / 1000 / (n - from);
    await settle();
    const end = process.memoryUsage();
    const held = supervisor.stats().agents;
    await supervisor.close();
    samples.push(end.rss / MiB);
    return {
      growthMiB: (end.rss - rssMark) / MiB,
      heapGrowthMiB: (end.heapUsed - heapMark) / MiB,
      rssAtMarkMiB: rssMark / MiB,
      rssEndMiB: end.rss / MiB,
      rssSpreadMiB: Math.max(...samples) - Math.min(...samples),
      held,
      perConversationUs,
    };
  } finally {
    tmp.remove();
  }
}

/** The store side of issue 13's figures: turn commits, saveMessage rate, restore, memory. */
export const persistenceSuite: SuiteBody = {
  async run({ quick, progress, flags }) {
    const figures: Figure[] = [];
    const only = stringFlag(flags, 'store');
    if (only !== undefined && only !== 'sqlite' && only !== 'postgres') {
      throw new BenchInputError(`--store must be sqlite or postgres, not ${only}`);
    }
    if (only === 'postgres') return postgresFigures(quick, progress);
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
      const { samples: sqlite } = await turnLatency(store, turns, false);
      progress('persistence: saveMessage rate');
      const rate = await saveMessageRate(store, quick ? 20_000 : 100_000);
      await store.close();
      progress('persistence: turn commit of a growing state (a fresh file)');
      const growingFile = tempFile('turn-growing');
      const growingStore = sqlitePersistence({ file: growingFile.file, tenantKey });
      const { samples: growing, stateBytes } = await turnLatency(growingStore, turns, true);
      await growingStore.close();
      growingFile.remove();
      const raw = await rawTurnLatency(turns, false);
      const rawGrowing = await rawTurnLatency(turns, true);
      const { samples: memory } = await turnLatency(new MemoryPersistence({ tenantKey }), turns, false);
      add('persistence.turn_p50_us', quantile(sqlite, 0.5), 'µs', {
        p90: round(quantile(sqlite, 0.9)),
        p999: round(quantile(sqlite, 0.999)),
        turns,
        memory_store_p50: round(quantile(memory, 0.5)),
        raw_sqlite_p50: round(quantile(raw, 0.5)),
        growing_state_p50: round(quantile(growing, 0.5)),
        growing_state_raw_p50: round(quantile(rawGrowing, 0.5)),
        growing_state_bytes_at_end: stateBytes,
      });
      add('persistence.turn_p99_us', quantile(sqlite, 0.99), 'µs', {
        memory_store_p99: round(quantile(memory, 0.99)),
        raw_sqlite_p99: round(quantile(raw, 0.99)),
      });
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

    // The supervisor side (a daemon on SQLite): resident heap, conversations passing through, restore —
    // in this order, so no closed supervisor's leftovers fall inside a memory figure's window.
    const idleCount = quick ? 1000 : 5000;
    // One figure per store: SQLite (a daemon's), the in-memory store (the default), none. Each
    // against the floor measured in its own run: the same messages as plain arrays, no supervisor
    // (what a library that only holds `messages[]` per conversation keeps).
    for (const [store, figure] of [
      ['sqlite', 'persistence.idle_heap_mib_per_1000'],
      ['memory', 'persistence.idle_heap_mib_memory_per_1000'],
      ['none', 'persistence.idle_heap_mib_none_per_1000'],
    ] as const) {
      progress(`persistence: heap of ${idleCount} idle resident conversations of 10 messages, store: ${store}`);
      const idle = await idleHeap(idleCount, store);
      add(figure, idle.perThousandMiB, 'MiB', {
        store,
        conversations: idleCount,
        empty_agent_mib_per_1000: round(idle.emptyPerThousandMiB),
        transcripts_only_mib_per_1000: round(idle.messagesPerThousandMiB),
        over_transcripts_only: round(idle.perThousandMiB / idle.messagesPerThousandMiB),
        messages: idle.messages,
        events: idle.events,
        state_json_bytes: idle.stateJsonBytes,
        events_json_bytes: idle.eventsJsonBytes,
      });
    }

    const through = quick ? 20_000 : 100_000;
    progress(`persistence: RSS while ${through} conversations pass through a supervisor`);
    const rss = await supervisorRssGrowth(through, 10_000, progress);
    add('persistence.rss_growth_mib_100k', rss.growthMiB, 'MiB', {
      conversations: through,
      from: 10_000,
      heap_growth_mib: round(rss.heapGrowthMiB),
      rss_at_mark_mib: round(rss.rssAtMarkMiB),
      rss_end_mib: round(rss.rssEndMiB),
      rss_spread_mib: round(rss.rssSpreadMiB),
      agents_held_at_end: rss.held,
      per_conversation_us: round(rss.perConversationUs),
    });

    const prompt = 'Refund 20 EUR?';
    progress('persistence: a supervisor restores 1,000 suspended conversations (their own tool asked)');
    const runs = quick ? 1 : 5;
    const parent = await restoreSuspended(refundDesk, 1000, prompt, runs, quick ? 100 : 990);
    const nestedCount = quick ? 200 : 1000;
    progress(`persistence: a supervisor restores ${nestedCount} conversations suspended two levels down`);
    const nested = await restoreSuspended(refundOffice, nestedCount, prompt, runs, quick ? 50 : nestedCount - 10);
    add('persistence.restore_1000_suspended_ms', median(parent.samplesMs), 'ms', {
      conversations: 1000,
      how: 'open the file + createSupervisor + listRequests + startAgent each, until all suspended',
      runs,
      samples_ms: parent.samplesMs.map((v) => round(v)).join(' '),
      list_ms: round(parent.listMs),
      setup_ms: round(parent.setupMs),
      answer_driven: parent.answered,
      answer_driven_ms_per_1000: round((parent.answerDrivenMs * 1000) / parent.answered),
      nested_conversations: nestedCount,
      nested_ms: round(median(nested.samplesMs)),
      nested_per_1000_ms: round((median(nested.samplesMs) * 1000) / nestedCount),
      nested_setup_ms: round(nested.setupMs),
      nested_answer_driven: nested.answered,
      nested_answer_driven_ms_per_1000: round((nested.answerDrivenMs * 1000) / nested.answered),
    });

    // The PostgreSQL store (a server this suite starts and stops), its figures named postgres.*.
    if (only === undefined) figures.push(...(await postgresFigures(quick, progress)));
    return figures;
  },
};
