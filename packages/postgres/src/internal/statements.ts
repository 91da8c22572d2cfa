/**
 * How long a chunk of a transcript grows (UTF-8 bytes), as in the SQLite store: a save rewrites its
 * agent's last chunk, so this bounds what a message costs to append; a longer message is a chunk of
 * its own.
 */
export const MESSAGE_CHUNK_BYTES = 2048;

/** A schema name quoted as an SQL identifier. */
export function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/**
 * The SQL of every statement the store runs, its tables qualified by `schema`. Each is sent as a
 * named prepared statement (parsed once per connection). The same statements as the SQLite store's,
 * in PostgreSQL's dialect; a fence that SQLite's single writer made safe is a row lock here: every
 * write of a conversation first locks its `conversations` row (see `lockConversation`), so its
 * writers take turns, across hosts, and each re-reads what the one before it committed.
 */
export function statementsFor(schema: string) {
  const S = `${quoteIdent(schema)}.`;
  return {
    // Insert the conversation's row, or lock it: a row it inserts is returned (the conversation
    // was new); an existing one is left as it is, not returned, and locked all the same (an
    // ON CONFLICT DO UPDATE whose WHERE is false locks the row it meets) — one round trip.
    touchConversation: `INSERT INTO ${S}conversations AS c (tenant, conversation_id) VALUES ($1, $2)
       ON CONFLICT (tenant, conversation_id) DO UPDATE SET tenant = excluded.tenant WHERE false RETURNING 1 AS inserted`,
    lockConversation: `SELECT 1 FROM ${S}conversations WHERE tenant = $1 AND conversation_id = $2 FOR NO KEY UPDATE`,
    summarizeConversation: `INSERT INTO ${S}conversations (tenant, conversation_id, agent_id, agent_name, status, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (tenant, conversation_id) DO UPDATE SET agent_id = excluded.agent_id,
         agent_name = excluded.agent_name, status = excluded.status, updated_at = excluded.updated_at`,
    putState: `INSERT INTO ${S}states (tenant, conversation_id, agent_id, version, json, writer, revision)
       VALUES ($1, $2, $3, $4, $5, $6, 1)
       ON CONFLICT (tenant, conversation_id, agent_id) DO UPDATE SET version = excluded.version, json = excluded.json,
         writer = excluded.writer, revision = states.revision + 1`,
    insertState: `INSERT INTO ${S}states (tenant, conversation_id, agent_id, version, json, writer, revision)
       VALUES ($1, $2, $3, $4, $5, $6, 1) ON CONFLICT (tenant, conversation_id, agent_id) DO NOTHING`,
    updateState: `UPDATE ${S}states SET version = $1, json = $2, writer = $3, revision = revision + 1
       WHERE tenant = $4 AND conversation_id = $5 AND agent_id = $6 AND revision = $7`,
    appendState: `UPDATE ${S}states SET version = $1, json = $2, revision = revision + 1
       WHERE tenant = $3 AND conversation_id = $4 AND agent_id = $5 AND revision = $6 AND writer = $7`,
    // The state and its messages' chunks in one statement: one snapshot.
    getState: `SELECT s.json, s.revision, s.writer,
         ARRAY(SELECT m.chunk FROM ${S}state_messages m WHERE m.tenant = s.tenant AND m.conversation_id = s.conversation_id
           AND m.agent_id = s.agent_id ORDER BY m.chunk) AS chunks,
         ARRAY(SELECT m.count FROM ${S}state_messages m WHERE m.tenant = s.tenant AND m.conversation_id = s.conversation_id
           AND m.agent_id = s.agent_id ORDER BY m.chunk) AS counts,
         ARRAY(SELECT m.json FROM ${S}state_messages m WHERE m.tenant = s.tenant AND m.conversation_id = s.conversation_id
           AND m.agent_id = s.agent_id ORDER BY m.chunk) AS texts
       FROM ${S}states s WHERE s.tenant = $1 AND s.conversation_id = $2 AND s.agent_id = $3`,
    getStateRevision: `SELECT revision FROM ${S}states WHERE tenant = $1 AND conversation_id = $2 AND agent_id = $3`,
    appendStateMessages: `UPDATE ${S}state_messages SET json = json || $4, count = count + $5
       WHERE tenant = $1 AND conversation_id = $2 AND agent_id = $3
         AND chunk = (SELECT max(chunk) FROM ${S}state_messages WHERE tenant = $1 AND conversation_id = $2 AND agent_id = $3)
         AND octet_length(json) + octet_length($4) <= ${MESSAGE_CHUNK_BYTES}`,
    addStateMessages: `INSERT INTO ${S}state_messages (tenant, conversation_id, agent_id, chunk, count, json)
       VALUES ($1, $2, $3, coalesce((SELECT max(chunk) FROM ${S}state_messages
           WHERE tenant = $1 AND conversation_id = $2 AND agent_id = $3), 0) + 1, $5, $4)`,
    clearStateMessages: `DELETE FROM ${S}state_messages WHERE tenant = $1 AND conversation_id = $2 AND agent_id = $3`,
    appendMessages: `UPDATE ${S}messages SET json = json || $4, count = count + $5
       WHERE tenant = $1 AND conversation_id = $2 AND agent_id = $3
         AND chunk = (SELECT max(chunk) FROM ${S}messages WHERE tenant = $1 AND conversation_id = $2 AND agent_id = $3)
         AND octet_length(json) + octet_length($4) <= ${MESSAGE_CHUNK_BYTES}`,
    addMessages: `INSERT INTO ${S}messages (tenant, conversation_id, agent_id, chunk, count, json)
       VALUES ($1, $2, $3, coalesce((SELECT max(chunk) FROM ${S}messages
           WHERE tenant = $1 AND conversation_id = $2 AND agent_id = $3), 0) + 1, $5, $4)`,
    // A batch of display messages alone that fits one chunk: one statement (see migration 6).
    appendMessagesAlone: `SELECT ${S}append_messages($1, $2, $3, $4, $5) AS created`,
    getMessages: `SELECT chunk, count, json FROM ${S}messages WHERE tenant = $1 AND conversation_id = $2 AND agent_id = $3
       ORDER BY chunk`,
    getRunHead: `SELECT conversation_id AS "conversationId", attempt, status, owner_id AS "ownerId" FROM ${S}runs
       WHERE tenant = $1 AND run_id = $2`,
    getRun: `SELECT json FROM ${S}runs WHERE tenant = $1 AND run_id = $2`,
    // Fenced in the statement, as SQLite's: a saved row of another conversation, of a later attempt,
    // or running at this attempt under another store is left as it is (no row: the caller reads why).
    putRun: `INSERT INTO ${S}runs AS r (tenant, run_id, conversation_id, status, attempt, updated_at, owner_id, json)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
       ON CONFLICT (tenant, run_id) DO UPDATE SET status = excluded.status, attempt = excluded.attempt,
         updated_at = excluded.updated_at, owner_id = excluded.owner_id, json = excluded.json
       WHERE r.conversation_id = excluded.conversation_id AND r.attempt <= excluded.attempt
         AND NOT (r.attempt = excluded.attempt AND r.status = 'running' AND r.owner_id <> excluded.owner_id)`,
    liveRuns: `SELECT json FROM ${S}runs WHERE tenant = $1 AND conversation_id = $2
         AND status IN ('running', 'suspended', 'interrupted') AND status IN ('running', 'suspended')
       ORDER BY updated_at, run_id`,
    liveAndInterruptedRuns: `SELECT json FROM ${S}runs WHERE tenant = $1 AND conversation_id = $2
         AND status IN ('running', 'suspended', 'interrupted')
       ORDER BY updated_at, run_id`,
    // Runs left running by an owner whose lease ran out (or that is gone) — never the asking
    // store's own ($2: it is alive, however late its renewal) — locked for this transaction; a row another transaction is writing right now is skipped: its writer is live,
    // and its write says what the row becomes.
    orphanedRuns: `SELECT tenant, run_id AS "runId", json FROM ${S}runs r
       WHERE status = 'running' AND ($1::text IS NULL OR tenant = $1) AND owner_id <> $2
         AND NOT EXISTS (SELECT 1 FROM ${S}owners o WHERE o.owner_id = r.owner_id AND o.lease_until > clock_timestamp())
       FOR UPDATE SKIP LOCKED`,
    // One run a store of this process stopped running (its end could not be saved).
    unsavedRun: `SELECT tenant, run_id AS "runId", json FROM ${S}runs
       WHERE tenant = $1 AND run_id = $2 AND owner_id = $3 AND attempt = $4 AND status = 'running'
       FOR UPDATE SKIP LOCKED`,
    interrupt: `UPDATE ${S}runs r SET status = 'interrupted', updated_at = $1, json = u.json
       FROM unnest($2::text[], $3::text[], $4::text[]) AS u(tenant, run_id, json)
       WHERE r.tenant = u.tenant AND r.run_id = u.run_id AND r.status = 'running'`,
    runningRuns: `SELECT run_id AS "runId", owner_id AS "ownerId", attempt,
         (r.owner_id = $3 OR EXISTS (SELECT 1 FROM ${S}owners o
           WHERE o.owner_id = r.owner_id AND o.lease_until > clock_timestamp())) AS live
       FROM ${S}runs r
       WHERE tenant = $1 AND conversation_id = $2 AND status IN ('running', 'suspended', 'interrupted')
         AND status = 'running' ORDER BY updated_at, run_id`,
    getCallConversation: `SELECT conversation_id FROM ${S}tool_calls WHERE tenant = $1 AND run_id = $2 LIMIT 1`,
    getCallStatus: `SELECT status FROM ${S}tool_calls WHERE tenant = $1 AND run_id = $2 AND tool_call_id = $3 AND attempt = $4`,
    startCall: `INSERT INTO ${S}tool_calls (tenant, run_id, tool_call_id, attempt, conversation_id, tool_name, idempotent, started_at, status)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'started')
       ON CONFLICT (tenant, run_id, tool_call_id, attempt) DO UPDATE SET tool_name = excluded.tool_name,
         idempotent = excluded.idempotent, started_at = excluded.started_at`,
    commitCall: `UPDATE ${S}tool_calls SET status = 'committed', committed_at = $1
       WHERE tenant = $2 AND run_id = $3 AND tool_call_id = $4 AND attempt = $5 AND status = 'started'`,
    openCalls: `SELECT run_id AS "runId", tool_call_id AS "toolCallId", attempt, tool_name AS "toolName", idempotent,
         started_at AS "startedAt", status, committed_at AS "committedAt"
       FROM ${S}tool_calls WHERE tenant = $1 AND run_id = $2 AND status = 'started' ORDER BY started_at, tool_call_id, attempt`,
    getRequest: `SELECT conversation_id AS "conversationId", status, json FROM ${S}requests WHERE tenant = $1 AND request_id = $2`,
    lockRequest: `SELECT conversation_id AS "conversationId", status, json FROM ${S}requests
       WHERE tenant = $1 AND request_id = $2 FOR UPDATE`,
    openRequest: `INSERT INTO ${S}requests (tenant, request_id, conversation_id, status, opened_at, json) VALUES ($1, $2, $3, 'open', $4, $5)`,
    closeRequest: `UPDATE ${S}requests SET status = $1, closed_at = $2, json = $3
       WHERE tenant = $4 AND request_id = $5 AND status = 'open'`,
    listRequests: `SELECT opened_at AS "openedAt", request_id AS "requestId", json FROM ${S}requests
       WHERE tenant = $1 AND status = 'open'
         AND ($2::double precision IS NULL OR opened_at > $2 OR (opened_at = $2 AND request_id > $3))
       ORDER BY opened_at, request_id LIMIT $4`,
    listConversationRequests: `SELECT opened_at AS "openedAt", request_id AS "requestId", json FROM ${S}requests
       WHERE tenant = $1 AND conversation_id = $5 AND status = 'open'
         AND ($2::double precision IS NULL OR opened_at > $2 OR (opened_at = $2 AND request_id > $3))
       ORDER BY opened_at, request_id LIMIT $4`,
    listConversations: `SELECT c.conversation_id AS "conversationId", c.agent_id AS "agentId", c.agent_name AS "agentName",
         c.status, c.updated_at AS "updatedAt",
         (SELECT count(*) FROM ${S}requests r WHERE r.tenant = c.tenant AND r.conversation_id = c.conversation_id
            AND r.status = 'open')::integer AS "openRequests"
       FROM ${S}conversations c
       WHERE c.tenant = $1 AND c.updated_at IS NOT NULL
         AND ($2::double precision IS NULL OR c.updated_at < $2 OR (c.updated_at = $2 AND c.conversation_id > $3))
       ORDER BY c.updated_at DESC, c.conversation_id LIMIT $4`,
    deleteConversation: `DELETE FROM ${S}conversations WHERE tenant = $1 AND conversation_id = $2`,
    pruneRuns: `DELETE FROM ${S}runs WHERE status NOT IN ('running', 'suspended') AND updated_at < $1
         AND ($2::text IS NULL OR tenant = $2) RETURNING tenant, run_id AS "runId"`,
    pruneRunCalls: `DELETE FROM ${S}tool_calls WHERE tenant = $1 AND run_id = $2`,
    pruneCalls: `DELETE FROM ${S}tool_calls WHERE status = 'committed' AND committed_at < $1 AND ($2::text IS NULL OR tenant = $2)`,
    pruneRequests: `DELETE FROM ${S}requests WHERE status <> 'open' AND closed_at < $1 AND ($2::text IS NULL OR tenant = $2)`,
    addOwner: `INSERT INTO ${S}owners (owner_id, host, pid, opened_at, lease_until)
       VALUES ($1, $2, $3, clock_timestamp(), clock_timestamp() + $4 * interval '1 millisecond')
       ON CONFLICT (owner_id) DO UPDATE SET lease_until = excluded.lease_until`,
    renewOwner: `UPDATE ${S}owners SET lease_until = clock_timestamp() + $2 * interval '1 millisecond' WHERE owner_id = $1`,
    dropOwner: `DELETE FROM ${S}owners WHERE owner_id = $1`,
    dropExpiredOwners: `DELETE FROM ${S}owners WHERE lease_until <= clock_timestamp() - interval '1 minute'`,
  } as const;
}

/** The statements of one store, by name. */
export type Statements = ReturnType<typeof statementsFor>;

/** A statement's name. */
export type StatementName = keyof Statements;
