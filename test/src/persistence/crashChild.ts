// A supervisor on SQLite (or PostgreSQL) doing durable work until crash.test.ts (postgresCrash.test.ts)
// kills it with SIGKILL.
//
//   CRASH_FILE=<db> CRASH_EFFECTS=<log> CRASH_SEED=<n> [CRASH_MODE=final] node crashChild.js
//   CRASH_PG_URL=<url> CRASH_PG_SCHEMA=<schema> CRASH_EFFECTS=... node crashChild.js
//
// On PostgreSQL a killed process's runs are another's once its lease has run out: until then its
// conversations are refused here (ERR_CONVERSATION_BUSY), and this process retries, as a host
// taking over does.
// First it restores what the last process left (every conversation in the store; interrupted
// messages resumed, open requests answered), then it works — conversations sending messages that
// charge (not idempotent), look up (idempotent), delegate a charge to a worker, and ask a question
// two levels down — until it is killed. With `final` it only restores, then exits.
//
// One line per fact the test checks:
//   interrupted <agentId>                      restored with a message a crash interrupted
//   resumed <agentId> <status>                 resume() of it resolved
//   answered <requestId> <status>              an answer to an open request resolved
//   saved <agentId> <users> <assistants>       a reply resolved; the store holds that many messages of each
//   ready                                      restored; work starts
//   step <event>                               a turn, a tool call starting or ending, a subagent
//                                              spawned or done, a question opened: the test kills
//                                              the process after a random number of these
//   final <conversations> <open requests> <interrupted>
import { isTroupeError } from '@troupe/core';
import { postgresPersistence } from '@troupe/postgres';
import { sqlitePersistence } from '@troupe/sqlite';
import { type AgentHandle, createSupervisor, type PersistenceAdapter } from '@troupe/supervisor';
import { office } from '../fixtures/agents/durable.js';

const file = process.env.CRASH_FILE as string;
const effects = process.env.CRASH_EFFECTS as string;
const mode = process.env.CRASH_MODE;
let seed = Number(process.env.CRASH_SEED) >>> 0 || 1;
function random(): number {
  // xorshift32: the same seed, the same choices.
  seed ^= seed << 13;
  seed >>>= 0;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  seed >>>= 0;
  return seed / 0x1_0000_0000;
}

const scope = { org: 'acme', userId: 'crash' };
const toolContext = { effects, pauseMs: 3 };
const tenantKey = (s: unknown) => (s as { org: string }).org;
const store: PersistenceAdapter =
  process.env.CRASH_PG_URL === undefined
    ? sqlitePersistence({ file, tenantKey })
    : await postgresPersistence({
        connectionString: process.env.CRASH_PG_URL,
        schema: process.env.CRASH_PG_SCHEMA as string,
        leaseMs: 300,
        tenantKey,
      });

/** `fn`, again while a dead process's lease still holds the conversation (never on SQLite: pids). */
async function taking<T>(fn: () => Promise<T>): Promise<T> {
  for (;;) {
    try {
      return await fn();
    } catch (error) {
      if (process.env.CRASH_PG_URL === undefined || !isTroupeError(error, 'ERR_CONVERSATION_BUSY')) throw error;
    }
  }
}
const supervisor = createSupervisor({ agents: [office], persistence: store, pool: { threads: 1, graceMs: 200 } });
const handles = new Map<string, AgentHandle>();
// The points the test picks its kill from: one line per step of the work, in order.
for (const event of [
  'agent.turn',
  'tool.execute.start',
  'tool.execute.stop',
  'subagent.spawned',
  'subagent.done',
  'request.opened',
] as const) {
  supervisor.on(event, () => say(`step ${event}`));
}
if (process.env.CRASH_DEBUG !== undefined) {
  // What happened, on stderr, for a round that went wrong.
  for (const event of [
    'agent.turn',
    'agent.done',
    'agent.failed',
    'agent.cancelled',
    'tool.execute.start',
    'tool.execute.stop',
    'subagent.spawned',
    'subagent.done',
    'subagent.failed',
    'subagent.suspended',
    'request.opened',
    'request.withdrawn',
    'persistence.failed',
  ] as const) {
    supervisor.on(event, (e: object) =>
      process.stderr.write(
        `${event} ${JSON.stringify(e, (_k, v) => (v instanceof Error ? v.message : v)).slice(0, 200)}\n`,
      ),
    );
  }
}
const CONVERSATIONS = 6;

function say(line: string): void {
  process.stdout.write(`${line}\n`);
}

async function counts(id: string): Promise<string> {
  const messages = await store.loadMessages(scope, { agentId: id as never, conversationId: id });
  return `${messages.filter((m) => m.role === 'user').length} ${messages.filter((m) => m.role === 'assistant').length}`;
}

async function handle(id: string): Promise<AgentHandle> {
  let h = handles.get(id);
  if (h === undefined) {
    h = await taking(() => supervisor.startAgent(office, { scope, agentId: id, conversationId: id, toolContext }));
    handles.set(id, h);
    if (h.status === 'interrupted') {
      say(`interrupted ${id}`);
      const reply = await h.resume();
      say(`resumed ${id} ${reply.status}`);
    }
  }
  return h;
}

async function answerOpen(filter?: string): Promise<void> {
  for (const info of supervisor.pendingRequests()) {
    if (filter !== undefined && info.agentId !== filter) continue;
    const ok = random() < 0.8;
    try {
      const reply = await supervisor.answer(
        info.request.id,
        ok ? { ok: true, data: { env: 'prod' } } : { ok: false, reason: 'no' },
        { scope, toolContext },
      );
      say(`answered ${info.request.id} ${reply.status}`);
      if (reply.status === 'done') say(`saved ${info.agentId} ${await counts(info.agentId)}`);
    } catch (error) {
      // Answered by this process already (a second lane), never anything else.
      if (!isTroupeError(error, 'ERR_REQUEST_ALREADY_ANSWERED')) throw error;
    }
  }
}

async function restore(): Promise<void> {
  for (let after: string | undefined, more = true; more; ) {
    const page = await store.listConversations(scope, { after, limit: 100 });
    for (const c of page.items) await handle(c.conversationId);
    after = page.next;
    more = after !== undefined;
  }
  // Questions left open by the last process (they are listed by the store, so answerable here too).
  for (let after: string | undefined, more = true; more; ) {
    const page = await supervisor.listRequests(scope, { after, limit: 100 });
    for (const r of page.items) {
      const reply = await taking(() =>
        supervisor.answer(r.request.id, { ok: true, data: { env: 'eu' } }, { scope, toolContext }),
      );
      say(`answered ${r.request.id} ${reply.status}`);
    }
    after = page.next;
    more = after !== undefined;
  }
}

const MESSAGES = ['charge it', 'delegate a charge', 'please release', 'please release', 'hello'];

async function lane(k: number): Promise<never> {
  for (;;) {
    const id = `c${k * 2 + Math.floor(random() * 2)}`;
    const h = await handle(id);
    if (h.status === 'suspended') {
      await answerOpen(id);
      continue;
    }
    const message = MESSAGES[Math.floor(random() * MESSAGES.length)] as string;
    const reply = await h.send(message);
    if (reply.status !== 'suspended') say(`saved ${id} ${await counts(id)}`);
  }
}

await restore();
if (mode === 'final') {
  const conversations = (await store.listConversations(scope, { limit: 1000 })).items.length;
  const open = (await supervisor.listRequests(scope, { limit: 1000 })).items.length;
  const interrupted = [...handles.values()].filter((h) => h.status === 'interrupted').length;
  say(`final ${conversations} ${open} ${interrupted}`);
  await supervisor.close();
} else {
  say('ready');
  await Promise.all(Array.from({ length: CONVERSATIONS / 2 }, (_, k) => lane(k)));
}
