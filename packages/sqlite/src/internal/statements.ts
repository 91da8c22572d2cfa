import type Database from 'better-sqlite3';

/**
 * How long a chunk of a transcript grows (UTF-8 bytes): a save rewrites its agent's last chunk, so
 * this bounds what a message costs to append; a message longer than this is a chunk of its own.
 */
export const MESSAGE_CHUNK_BYTES = 2048;

/** The SQL of every statement the store runs. */
export const SQL = {
  touchConversation: 'INSERT OR IGNORE INTO conversations (tenant, conversation_id) VALUES (?, ?)',
  summarizeConversation: `INSERT INTO conversations (tenant, conversation_id, agent_id, agent_name, status, updated_at)
       VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT (tenant, conversation_id) DO UPDATE SET agent_id = excluded.agent_id,
         agent_name = excluded.agent_name, status = excluded.status, updated_at = excluded.updated_at`,
  // A save based on no revision: over whatever is there.
  putState: `INSERT INTO states (tenant, conversation_id, agent_id, version, json, writer, revision)
       VALUES (?, ?, ?, ?, ?, ?, 1)
       ON CONFLICT (tenant, conversation_id, agent_id) DO UPDATE SET version = excluded.version, json = excluded.json,
         writer = excluded.writer, revision = states.revision + 1`,
  // A save based on "nothing saved" (revision 0): only if still nothing is.
  insertState: `INSERT INTO states (tenant, conversation_id, agent_id, version, json, writer, revision)
       VALUES (?, ?, ?, ?, ?, ?, 1) ON CONFLICT (tenant, conversation_id, agent_id) DO NOTHING`,
  // A save based on a revision: only over that revision.
  updateState: `UPDATE states SET version = ?, json = ?, writer = ?, revision = revision + 1
       WHERE tenant = ? AND conversation_id = ? AND agent_id = ? AND revision = ?`,
  // A save that adds messages to the rows this store wrote at that revision (any other writer: no change).
  appendState: `UPDATE states SET version = ?, json = ?, revision = revision + 1
       WHERE tenant = ? AND conversation_id = ? AND agent_id = ? AND revision = ? AND writer = ?`,
  getState: 'SELECT json, revision, writer FROM states WHERE tenant = ? AND conversation_id = ? AND agent_id = ?',
  getStateRevision: 'SELECT revision FROM states WHERE tenant = ? AND conversation_id = ? AND agent_id = ?',
  getStateMessages: `SELECT chunk, count, json FROM state_messages WHERE tenant = ? AND conversation_id = ? AND agent_id = ?
       ORDER BY chunk`,
  // A state's messages, in chunks as a transcript's (see appendMessages, addMessages).
  appendStateMessages: `UPDATE state_messages SET json = json || @text, count = count + @count
       WHERE tenant = @tenant AND conversation_id = @conversation AND agent_id = @agent
         AND chunk = (SELECT max(chunk) FROM state_messages
           WHERE tenant = @tenant AND conversation_id = @conversation AND agent_id = @agent)
         AND octet_length(json) + octet_length(@text) <= ${MESSAGE_CHUNK_BYTES}`,
  addStateMessages: `INSERT INTO state_messages (tenant, conversation_id, agent_id, chunk, count, json)
       VALUES (@tenant, @conversation, @agent, coalesce((SELECT max(chunk) FROM state_messages
           WHERE tenant = @tenant AND conversation_id = @conversation AND agent_id = @agent), 0) + 1, @count, @text)`,
  clearStateMessages: 'DELETE FROM state_messages WHERE tenant = ? AND conversation_id = ? AND agent_id = ?',
  // A transcript's messages (lines of JSON) into its agent's last chunk, while the chunk stays within
  // MESSAGE_CHUNK_BYTES (no change otherwise: the caller starts the next chunk).
  appendMessages: `UPDATE messages SET json = json || @text, count = count + @count
       WHERE tenant = @tenant AND conversation_id = @conversation AND agent_id = @agent
         AND chunk = (SELECT max(chunk) FROM messages
           WHERE tenant = @tenant AND conversation_id = @conversation AND agent_id = @agent)
         AND octet_length(json) + octet_length(@text) <= ${MESSAGE_CHUNK_BYTES}`,
  addMessages: `INSERT INTO messages (tenant, conversation_id, agent_id, chunk, count, json)
       VALUES (@tenant, @conversation, @agent, coalesce((SELECT max(chunk) FROM messages
           WHERE tenant = @tenant AND conversation_id = @conversation AND agent_id = @agent), 0) + 1, @count, @text)`,
  getMessages: `SELECT chunk, count, json FROM messages WHERE tenant = ? AND conversation_id = ? AND agent_id = ?
       ORDER BY chunk`,
  getRunHead: `SELECT conversation_id AS conversationId, attempt, status, owner_id AS ownerId FROM runs
       WHERE tenant = ? AND run_id = ?`,
  getRun: 'SELECT json FROM runs WHERE tenant = ? AND run_id = ?',
  // Fenced in the statement: a saved row of another conversation, of a later attempt, or running at
  // this attempt under another store is left as it is (no change: the caller reads why).
  putRun: `INSERT INTO runs (tenant, run_id, conversation_id, status, attempt, updated_at, owner_id, json)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (tenant, run_id) DO UPDATE SET status = excluded.status, attempt = excluded.attempt,
         updated_at = excluded.updated_at, owner_id = excluded.owner_id, json = excluded.json
       WHERE runs.conversation_id = excluded.conversation_id AND runs.attempt <= excluded.attempt
         AND NOT (runs.attempt = excluded.attempt AND runs.status = 'running' AND runs.owner_id <> excluded.owner_id)`,
  // The first status term is runs_live's condition (as written there: the planner matches it).
  liveRuns: `SELECT json FROM runs WHERE tenant = ? AND conversation_id = ?
         AND status IN ('running', 'suspended', 'interrupted') AND status IN ('running', 'suspended')
       ORDER BY updated_at, run_id`,
  liveAndInterruptedRuns: `SELECT json FROM runs WHERE tenant = ? AND conversation_id = ?
         AND status IN ('running', 'suspended', 'interrupted')
       ORDER BY updated_at, run_id`,
  // A row whose JSON is damaged is marked all the same (its own conversation reports it when read):
  // one damaged row must not stop every tenant's recovery.
  interrupt: `UPDATE runs SET status = 'interrupted', updated_at = @now,
         json = CASE WHEN json_valid(json) THEN json_set(json, '$.status', 'interrupted', '$.updatedAt', @now) ELSE json END
       WHERE status IN ('running', 'suspended', 'interrupted') AND status = 'running'
         AND (@tenant IS NULL OR tenant = @tenant)
         AND owner_id NOT IN (SELECT value FROM json_each(@live))
       RETURNING json`,
  // One run a store of this thread stopped running (its end could not be saved): marked as a dead process's are.
  interruptRun: `UPDATE runs SET status = 'interrupted', updated_at = @now,
         json = CASE WHEN json_valid(json) THEN json_set(json, '$.status', 'interrupted', '$.updatedAt', @now) ELSE json END
       WHERE tenant = @tenant AND run_id = @run AND owner_id = @owner AND attempt = @attempt AND status = 'running'
       RETURNING json`,
  runningRuns: `SELECT run_id AS runId, owner_id AS ownerId, attempt FROM runs
       WHERE tenant = ? AND conversation_id = ? AND status IN ('running', 'suspended', 'interrupted')
         AND status = 'running' ORDER BY updated_at, run_id`,
  getCallConversation: 'SELECT conversation_id FROM tool_calls WHERE tenant = ? AND run_id = ? LIMIT 1',
  getCallStatus: 'SELECT status FROM tool_calls WHERE tenant = ? AND run_id = ? AND tool_call_id = ? AND attempt = ?',
  startCall: `INSERT INTO tool_calls (tenant, run_id, tool_call_id, attempt, conversation_id, tool_name, idempotent, started_at, status)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'started')
       ON CONFLICT (tenant, run_id, tool_call_id, attempt) DO UPDATE SET tool_name = excluded.tool_name,
         idempotent = excluded.idempotent, started_at = excluded.started_at`,
  commitCall: `UPDATE tool_calls SET status = 'committed', committed_at = ?
       WHERE tenant = ? AND run_id = ? AND tool_call_id = ? AND attempt = ? AND status = 'started'`,
  openCalls: `SELECT run_id AS runId, tool_call_id AS toolCallId, attempt, tool_name AS toolName, idempotent,
         started_at AS startedAt, status, committed_at AS committedAt
       FROM tool_calls WHERE tenant = ? AND run_id = ? AND status = 'started' ORDER BY started_at, tool_call_id, attempt`,
  getRequest:
    'SELECT conversation_id AS conversationId, status, json FROM requests WHERE tenant = ? AND request_id = ?',
  openRequest: `INSERT INTO requests (tenant, request_id, conversation_id, status, opened_at, json) VALUES (?, ?, ?, 'open', ?, ?)`,
  closeRequest: `UPDATE requests SET status = ?, closed_at = ?, json = ?
       WHERE tenant = ? AND request_id = ? AND status = 'open'`,
  listRequests: `SELECT opened_at AS openedAt, request_id AS requestId, json FROM requests
       WHERE tenant = @tenant AND status = 'open'
         AND (@at IS NULL OR opened_at > @at OR (opened_at = @at AND request_id > @key))
       ORDER BY opened_at, request_id LIMIT @limit`,
  // One conversation's: its own statement, so the conversation index is used (a restore asks once per conversation).
  listConversationRequests: `SELECT opened_at AS openedAt, request_id AS requestId, json FROM requests
       WHERE tenant = @tenant AND conversation_id = @conversation AND status = 'open'
         AND (@at IS NULL OR opened_at > @at OR (opened_at = @at AND request_id > @key))
       ORDER BY opened_at, request_id LIMIT @limit`,
  listConversations: `SELECT c.conversation_id AS conversationId, c.agent_id AS agentId, c.agent_name AS agentName, c.status,
         c.updated_at AS updatedAt,
         (SELECT count(*) FROM requests r WHERE r.tenant = c.tenant AND r.conversation_id = c.conversation_id
            AND r.status = 'open') AS openRequests
       FROM conversations c
       WHERE c.tenant = @tenant AND c.updated_at IS NOT NULL
         AND (@at IS NULL OR c.updated_at < @at OR (c.updated_at = @at AND c.conversation_id > @key))
       ORDER BY c.updated_at DESC, c.conversation_id LIMIT @limit`,
  deleteConversation: 'DELETE FROM conversations WHERE tenant = ? AND conversation_id = ?',
  pruneRuns: `DELETE FROM runs WHERE status NOT IN ('running', 'suspended') AND updated_at < @cutoff AND (@tenant IS NULL OR tenant = @tenant)
       RETURNING tenant, run_id AS runId`,
  pruneRunCalls: 'DELETE FROM tool_calls WHERE tenant = ? AND run_id = ?',
  pruneCalls: `DELETE FROM tool_calls WHERE status = 'committed' AND committed_at < @cutoff AND (@tenant IS NULL OR tenant = @tenant)`,
  pruneRequests: `DELETE FROM requests WHERE status != 'open' AND closed_at < @cutoff AND (@tenant IS NULL OR tenant = @tenant)`,
  addOwner: 'INSERT INTO owners (owner_id, pid, pid_start, opened_at) VALUES (?, ?, ?, ?)',
  owners: 'SELECT owner_id AS ownerId, pid, pid_start AS pidStart FROM owners',
  dropOwner: 'DELETE FROM owners WHERE owner_id = ?',
} as const;

// Statements whose rows are one value: `.pluck()`ed.
const PLUCKED: ReadonlySet<string> = new Set([
  'getStateRevision',
  'getRun',
  'liveRuns',
  'liveAndInterruptedRuns',
  'interrupt',
  'interruptRun',
  'getCallConversation',
  'getCallStatus',
]);

/** A prepared statement. */
export type Statement = Database.Statement<unknown[], unknown>;

/** The prepared statements of one open store. */
export type Statements = { readonly [K in keyof typeof SQL]: Statement };

/** Every statement the store runs, prepared once at open. */
export function prepareStatements(db: Database.Database): Statements {
  const out: Record<string, Statement> = {};
  for (const [name, sql] of Object.entries(SQL)) {
    const statement = db.prepare(sql) as Statement;
    out[name] = PLUCKED.has(name) ? statement.pluck() : statement;
  }
  return out as Statements;
}
