// The PostgreSQL store's figures of `pnpm bench persistence` (issue 30): a 10 KB turn saved against
// the raw `pg` floor (the same SQL over the same driver, in the same run), saveMessage's rate,
// restoring 1,000 suspended conversations, and the takeover of a killed API host's conversation.
// The server is the one the tests use: started here on 127.0.0.1 in a temporary directory, stopped
// at the end (fsync off: what is measured is the store and the server's work, not the disk).
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import type { AgentId, LoopState, Message } from '@troupe/core';
import { sealMessage } from '@troupe/core/internal';
import { type PostgresPersistence, postgresPersistence } from '@troupe/postgres';
import {
  type AgentStateEnvelope,
  type PersistenceContext,
  PersistenceRules,
  type RunRecord,
  STATE_ENVELOPE_VERSION,
} from '@troupe/supervisor';
import { type PostgresServer, startPostgres } from '@troupe/tests/servers/postgres';
import pg from 'pg';
import type { Figure } from '../Suite.js';
import { median, nowNs, quantile, round } from '../stats.js';

const scope = Object.freeze({ tenant: 'bench' });
const tenantKey = (s: unknown) => (s as { tenant: string }).tenant;
const HOST = fileURLToPath(new URL('../workers/postgresHost.js', import.meta.url));
const CONVERSATIONS = 100;

function ctx(i: number): PersistenceContext {
  return { agentId: `agent-${i}` as AgentId, conversationId: `conversation-${i}` };
}

/** A loop state of about `bytes` of JSON in 10 sealed messages (as the agent loop appends them). */
function loopState(agentId: string, bytes: number): LoopState {
  const perMessage = Math.max(1, Math.floor(bytes / 10) - 40);
  return {
    agentId: agentId as AgentId,
    messages: Array.from({ length: 10 }, (_, i) =>
      sealMessage({
        role: i % 2 === 0 ? 'user' : 'assistant',
        content: `${i}:`.padEnd(perMessage, 'lorem ipsum dolor sit amet '),
      }),
    ),
    todos: [],
    metadata: { customer: 'A-17', notes: ['called twice'] },
    updates: [],
    events: [],
    turns: 5,
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

function turnMessages(t: number): [Message, Message] {
  return [
    sealMessage({ role: 'user', content: `and the invoice? (${t})` }),
    sealMessage({ role: 'assistant', content: `sent again (${t})` }),
  ];
}

let schemas = 0;
async function storeOn(server: PostgresServer, label: string, leaseMs?: number): Promise<PostgresPersistence> {
  return postgresPersistence({
    connectionString: server.url,
    schema: `bench_${label}_${process.pid}_${++schemas}`,
    tenantKey,
    ...(leaseMs === undefined ? {} : { leaseMs }),
  });
}

/** One turn commit, timed in µs; `close` ends what it holds. */
interface Turns {
  turn(t: number): Promise<number>;
  close(): Promise<void>;
}

/** Turn commits through the store: a 10 KB state, two display messages, the run's row; based on the revision held. */
function storeTurns(store: PostgresPersistence): Turns {
  const states = Array.from({ length: CONVERSATIONS }, (_, i) => loopState(ctx(i).agentId, 10 * 1024));
  const revisions = new Array<number>(CONVERSATIONS).fill(0);
  return {
    async turn(t) {
      const i = t % CONVERSATIONS;
      const c = ctx(i);
      const batch = {
        envelope: envelope(c, states[i] as LoopState, t),
        messages: turnMessages(t),
        runs: [runRow(c, 'done', t)],
        basedOn: (revisions[i] as number)++,
      };
      const start = nowNs();
      await store.commit(scope, batch, c);
      return (nowNs() - start) / 1000;
    },
    close: () => store.close(),
  };
}

/**
 * The floor under {@link storeTurns}: the statements a turn commit runs — BEGIN, the conversation's
 * upsert (which locks its row), the state's fenced update (its messages unchanged: they stay in
 * their chunks), two display messages appended to the transcript's last chunk, the run's fenced
 * upsert, COMMIT — as named prepared statements over one `pg` client, every JSON text encoded
 * before the clock starts, in a schema the store made. What is left between the two is the store's
 * own work: checking the batch, encoding, taking a client from its pool.
 */
async function rawTurns(server: PostgresServer): Promise<Turns> {
  const made = await storeOn(server, 'raw');
  const schema = made.address.schema;
  await made.close();
  const client = new pg.Client({ connectionString: server.url });
  await client.connect();
  const S = `"${schema}".`;
  const q = (name: string, text: string, values: unknown[]) => client.query({ name, text, values });
  const sql = {
    conversation: `INSERT INTO ${S}conversations (tenant, conversation_id, agent_id, agent_name, status, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (tenant, conversation_id) DO UPDATE SET agent_id = excluded.agent_id,
         agent_name = excluded.agent_name, status = excluded.status, updated_at = excluded.updated_at`,
    insertState: `INSERT INTO ${S}states (tenant, conversation_id, agent_id, version, json, writer, revision)
       VALUES ($1, $2, $3, $4, $5, 'raw', 1) ON CONFLICT (tenant, conversation_id, agent_id) DO NOTHING`,
    updateState: `UPDATE ${S}states SET version = $1, json = $2, revision = revision + 1
       WHERE tenant = $3 AND conversation_id = $4 AND agent_id = $5 AND revision = $6 AND writer = 'raw'`,
    addStateMessages: `INSERT INTO ${S}state_messages (tenant, conversation_id, agent_id, chunk, count, json)
       VALUES ($1, $2, $3, coalesce((SELECT max(chunk) FROM ${S}state_messages
           WHERE tenant = $1 AND conversation_id = $2 AND agent_id = $3), 0) + 1, $5, $4)`,
    appendMessages: `UPDATE ${S}messages SET json = json || $4, count = count + $5
       WHERE tenant = $1 AND conversation_id = $2 AND agent_id = $3
         AND chunk = (SELECT max(chunk) FROM ${S}messages WHERE tenant = $1 AND conversation_id = $2 AND agent_id = $3)
         AND octet_length(json) + octet_length($4) <= 2048`,
    addMessages: `INSERT INTO ${S}messages (tenant, conversation_id, agent_id, chunk, count, json)
       VALUES ($1, $2, $3, coalesce((SELECT max(chunk) FROM ${S}messages
           WHERE tenant = $1 AND conversation_id = $2 AND agent_id = $3), 0) + 1, $5, $4)`,
    run: `INSERT INTO ${S}runs AS r (tenant, run_id, conversation_id, status, attempt, updated_at, owner_id, json)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
       ON CONFLICT (tenant, run_id) DO UPDATE SET status = excluded.status, attempt = excluded.attempt,
         updated_at = excluded.updated_at, owner_id = excluded.owner_id, json = excluded.json
       WHERE r.conversation_id = excluded.conversation_id AND r.attempt <= excluded.attempt
         AND NOT (r.attempt = excluded.attempt AND r.status = 'running' AND r.owner_id <> excluded.owner_id)`,
  };
  const states = Array.from({ length: CONVERSATIONS }, (_, i) => loopState(ctx(i).agentId, 10 * 1024));
  return {
    async turn(t) {
      const i = t % CONVERSATIONS;
      const c = ctx(i);
      const state = states[i] as LoopState;
      const first = t < CONVERSATIONS;
      const parts = PersistenceRules.encodeStateParts(envelope(c, state, t), 'envelope', 0);
      if (parts === undefined) throw new Error('the bench state cannot be split');
      const stateChunk = `${parts.messages.join('\n')}\n`;
      const said = turnMessages(t)
        .map((m) => `${JSON.stringify(m)}\n`)
        .join('');
      const runJson = JSON.stringify(runRow(c, 'done', t));
      const key = ['bench', c.conversationId, c.agentId];
      const start = nowNs();
      await client.query('BEGIN');
      await q('c', sql.conversation, [...key, 'bench', 'idle', t]);
      if (first) {
        await q('is', sql.insertState, [...key, STATE_ENVELOPE_VERSION, parts.shell]);
        await q('asm', sql.addStateMessages, [...key, stateChunk, parts.messages.length]);
      } else {
        await q('us', sql.updateState, [STATE_ENVELOPE_VERSION, parts.shell, ...key, Math.floor(t / CONVERSATIONS)]);
      }
      if ((await q('am', sql.appendMessages, [...key, said, 2])).rowCount !== 1) {
        await q('adm', sql.addMessages, [...key, said, 2]);
      }
      await q('r', sql.run, ['bench', `run-${c.conversationId}`, c.conversationId, 'done', 1, t, 'raw', runJson]);
      await client.query('COMMIT');
      return (nowNs() - start) / 1000;
    },
    close: () => client.end(),
  };
}

/**
 * The store's turns and the raw floor's, interleaved in blocks of 100 (each block of one, then the
 * same of the other), so that both meet the same load of a shared machine; 500 of each to warm up.
 */
async function pairedTurns(store: Turns, raw: Turns, turns: number): Promise<{ store: number[]; raw: number[] }> {
  const out = { store: [] as number[], raw: [] as number[] };
  for (let block = 0; block * 100 < turns + 500; block++) {
    for (const [turns_, into] of [
      [raw, out.raw],
      [store, out.store],
    ] as const) {
      for (let k = 0; k < 100; k++) {
        const t = block * 100 + k;
        const us = await turns_.turn(t);
        if (t >= 500) into.push(us);
      }
    }
  }
  return out;
}

/** saveMessage calls per second: `inFlight` callers at once over 50 conversations (1: one after another). */
async function saveMessageRate(store: PostgresPersistence, count: number, inFlight: number): Promise<number> {
  const message: Message = { role: 'assistant', content: 'a reply of a typical length, about eighty characters long.' };
  for (let i = 0; i < 500; i++) await store.saveMessage(scope, message, ctx(i % 50));
  let done = 0;
  const start = nowNs();
  await Promise.all(
    Array.from({ length: inFlight }, async (_, lane) => {
      // Each caller keeps to conversations of its own: callers of one conversation take turns on its row.
      const mine = Math.max(1, Math.floor(50 / inFlight));
      for (let k = 0; done < count; k++) {
        done++;
        await store.saveMessage(scope, message, ctx(lane + inFlight * (k % mine)));
      }
    }),
  );
  return count / ((nowNs() - start) / 1e9);
}

/** Write `n` suspended conversations, then a new store opens and loads each one's state, live runs and request. */
async function restoreSuspended(server: PostgresServer, n: number): Promise<{ ms: number; openMs: number }> {
  const writer = await storeOn(server, 'restore');
  const schema = writer.address.schema;
  for (let i = 0; i < n; i++) {
    const c = ctx(i);
    const state = loopState(c.agentId, 4 * 1024);
    await writer.commit(
      scope,
      {
        envelope: envelope(c, state, i, true),
        runs: [runRow(c, 'suspended', i, state)],
        openedRequests: [
          {
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
            openedAt: i,
          },
        ],
      },
      c,
    );
  }
  await writer.close();
  const start = nowNs();
  const reader = await postgresPersistence({ connectionString: server.url, schema, tenantKey });
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
}

/**
 * ms from the SIGKILL of an API host (a process whose store holds a running run) until another
 * host's store sees the run interrupted — what `startAgent` there does: `markInterrupted({ scope })`
 * then the conversation's runs, again until it is no longer running under the dead host's lease.
 */
async function takeover(server: PostgresServer, leaseMs: number, rounds: number): Promise<number[]> {
  const taker = await storeOn(server, 'takeover', leaseMs);
  const schema = taker.address.schema;
  const samples: number[] = [];
  try {
    for (let round = 0; round < rounds; round++) {
      const conversationId = `host-${round}`;
      const host = spawn(process.execPath, [HOST], {
        env: {
          ...process.env,
          HOST_URL: server.url,
          HOST_SCHEMA: schema,
          HOST_LEASE_MS: String(leaseMs),
          HOST_CONVERSATION: conversationId,
        },
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      host.stdout?.setEncoding('utf8');
      await new Promise<void>((resolve, reject) => {
        host.stdout?.on('data', (d: string) => d.includes('ready') && resolve());
        host.once('exit', (code) => reject(new Error(`the API host exited (${code}) before it was ready`)));
      });
      const exited = once(host, 'exit');
      host.kill('SIGKILL');
      await exited;
      const t0 = nowNs();
      const c = { agentId: `agent-${conversationId}` as AgentId, conversationId };
      for (;;) {
        await taker.markInterrupted({ scope });
        const runs = await taker.loadRuns(scope, c, { interrupted: true });
        if (runs.some((r) => r.status === 'interrupted')) break;
      }
      samples.push((nowNs() - t0) / 1e6);
    }
  } finally {
    await taker.close();
  }
  return samples;
}

/** The median µs of a round trip (`SELECT 1`, a named statement, one client): the floor of any statement here. */
async function roundTripUs(server: PostgresServer, n: number): Promise<number> {
  const client = new pg.Client({ connectionString: server.url });
  await client.connect();
  try {
    const samples: number[] = [];
    for (let i = 0; i < n + 200; i++) {
      const start = nowNs();
      await client.query({ name: 'rtt', text: 'SELECT 1', values: [] });
      if (i >= 200) samples.push((nowNs() - start) / 1000);
    }
    return median(samples);
  } finally {
    await client.end();
  }
}

/** The PostgreSQL figures (suite `persistence`, names `postgres.*`). */
export async function postgresFigures(quick: boolean, progress: (message: string) => void): Promise<Figure[]> {
  const figures: Figure[] = [];
  const add = (name: string, value: number, unit: string, detail?: Figure['detail']) =>
    figures.push({
      suite: 'persistence',
      name,
      value: round(value),
      unit,
      ...(detail === undefined ? {} : { detail }),
    });
  progress('persistence: starting a PostgreSQL server (127.0.0.1, a temporary directory)');
  const server = await startPostgres({ label: 'bench' });
  try {
    const turns = quick ? 2_000 : 10_000;
    progress('persistence: PostgreSQL turn commit, and the raw pg floor');
    const store = await storeOn(server, 'turn');
    const rawTurnsOf = await rawTurns(server);
    const { store: samples, raw } = await pairedTurns(storeTurns(store), rawTurnsOf, turns);
    await rawTurnsOf.close();
    const p50 = quantile(samples, 0.5);
    const rawP50 = quantile(raw, 0.5);
    add('postgres.turn_p50_ratio', p50 / rawP50, '×', {
      turn_p50_us: round(p50),
      raw_pg_p50_us: round(rawP50),
      turn_p90_us: round(quantile(samples, 0.9)),
      raw_pg_p99_us: round(quantile(raw, 0.99)),
      turns,
    });
    add('postgres.turn_p99_ms', quantile(samples, 0.99) / 1000, 'ms', {
      p999_ms: round(quantile(samples, 0.999) / 1000),
      raw_pg_p99_ms: round(quantile(raw, 0.99) / 1000),
    });
    progress('persistence: PostgreSQL saveMessage rate');
    const count = quick ? 5_000 : 30_000;
    const rttBefore = await roundTripUs(server, 2000);
    const sequential = await saveMessageRate(store, count, 1);
    const concurrent = await saveMessageRate(store, count, 8);
    const rtt = (rttBefore + (await roundTripUs(server, 2000))) / 2;
    add('postgres.save_message_per_s', concurrent, '/s', {
      in_flight: 8,
      one_at_a_time_per_s: round(sequential),
      // One statement a call: one round trip is its floor, measured beside it.
      round_trip_us: round(rtt),
      round_trip_floor_per_s: round(1e6 / rtt),
      calls: count,
    });
    await store.close();

    progress('persistence: PostgreSQL restore of 1,000 suspended conversations');
    const restores = quick ? 1 : 3;
    const restoreMs: number[] = [];
    let openMs = 0;
    for (let r = 0; r < restores; r++) {
      const one = await restoreSuspended(server, 1000);
      restoreMs.push(one.ms);
      openMs = one.openMs;
    }
    add('postgres.restore_1000_ms', median(restoreMs), 'ms', {
      runs: restores,
      round_trip_us: round(await roundTripUs(server, 2000)),
      samples_ms: restoreMs.map((v) => round(v)).join(' '),
      open_ms: round(openMs),
      how: 'open the store + markInterrupted + listRequests + loadState and loadRuns of each',
    });

    const leaseMs = 2000;
    const rounds = quick ? 3 : 7;
    progress(`persistence: PostgreSQL takeover of a killed API host (lease ${leaseMs} ms, ${rounds} kills)`);
    const taken = await takeover(server, leaseMs, rounds);
    add('postgres.takeover_p50_ms', median(taken), 'ms', {
      lease_ms: leaseMs,
      bound_ms: leaseMs + 1000,
      kills: rounds,
      samples_ms: taken.map((v) => round(v)).join(' '),
    });
  } finally {
    await server.stop();
  }
  return figures;
}
