// The schema as data only, apart from the code that applies it: the public SCHEMA_VERSION comes
// from here, so the package's type declarations do not reach pg's.

/** One numbered migration: the version it brings the schema to, and its SQL. */
export interface Migration {
  readonly version: number;
  readonly sql: string;
}

/**
 * Numbered migrations, applied in order at open inside one transaction, under an advisory lock (two
 * hosts starting at once migrate once). A migration is never edited once shipped: a change is a new
 * entry, numbered as the SQLite store's change of the same logical schema.
 *
 * The logical schema is the SQLite store's at its version 6 (`@troupe/sqlite`'s migrations), table
 * for table and column for column, so the first PostgreSQL migration is numbered 6: versions 1–5
 * were never written by a PostgreSQL store. What differs is what PostgreSQL needs to store the same
 * bytes and order them the same way:
 * - JSON documents are `text`, not `jsonb` (`jsonb` refuses a string holding U+0000, which
 *   `JSON.stringify` writes as `\u0000`, and reorders keys);
 * - every id and key is `text COLLATE "C"`: compared and ordered by code point, as SQLite's BINARY
 *   collation does, so paging cursors page the same;
 * - times are `double precision` (SQLite's REAL); counters and attempts `bigint` (SQLite's INTEGER);
 * - `owners` holds a lease on the database clock instead of a process id: liveness across hosts;
 * - one function, `append_messages`, saves a display message alone in one round trip.
 *
 * Every table is keyed by `tenant` first; the scope has no column anywhere. Rows hang off their
 * conversation so a deletion cascades.
 */
export const MIGRATIONS: readonly Migration[] = [
  {
    version: 6,
    sql: `
  CREATE TABLE troupe_meta (key text COLLATE "C" PRIMARY KEY, value text NOT NULL);
  CREATE TABLE owners (
    owner_id text COLLATE "C" PRIMARY KEY, host text NOT NULL, pid integer NOT NULL,
    opened_at timestamptz NOT NULL, lease_until timestamptz NOT NULL
  );
  CREATE TABLE conversations (
    tenant text COLLATE "C" NOT NULL, conversation_id text COLLATE "C" NOT NULL,
    agent_id text COLLATE "C", agent_name text COLLATE "C", status text COLLATE "C", updated_at double precision,
    PRIMARY KEY (tenant, conversation_id)
  );
  CREATE INDEX conversations_by_time ON conversations (tenant, updated_at DESC, conversation_id);
  CREATE TABLE states (
    tenant text COLLATE "C" NOT NULL, conversation_id text COLLATE "C" NOT NULL, agent_id text COLLATE "C" NOT NULL,
    version bigint NOT NULL, json text NOT NULL, revision bigint NOT NULL DEFAULT 1, writer text COLLATE "C",
    PRIMARY KEY (tenant, conversation_id, agent_id),
    FOREIGN KEY (tenant, conversation_id) REFERENCES conversations ON DELETE CASCADE
  );
  CREATE TABLE state_messages (
    tenant text COLLATE "C" NOT NULL, conversation_id text COLLATE "C" NOT NULL, agent_id text COLLATE "C" NOT NULL,
    chunk bigint NOT NULL, count bigint NOT NULL, json text NOT NULL,
    PRIMARY KEY (tenant, conversation_id, agent_id, chunk),
    FOREIGN KEY (tenant, conversation_id) REFERENCES conversations ON DELETE CASCADE
  );
  CREATE TABLE messages (
    tenant text COLLATE "C" NOT NULL, conversation_id text COLLATE "C" NOT NULL, agent_id text COLLATE "C" NOT NULL,
    chunk bigint NOT NULL, count bigint NOT NULL, json text NOT NULL,
    PRIMARY KEY (tenant, conversation_id, agent_id, chunk),
    FOREIGN KEY (tenant, conversation_id) REFERENCES conversations ON DELETE CASCADE
  );
  CREATE TABLE runs (
    tenant text COLLATE "C" NOT NULL, run_id text COLLATE "C" NOT NULL, conversation_id text COLLATE "C" NOT NULL,
    status text COLLATE "C" NOT NULL, attempt bigint NOT NULL, updated_at double precision NOT NULL,
    owner_id text COLLATE "C" NOT NULL, json text NOT NULL,
    PRIMARY KEY (tenant, run_id),
    FOREIGN KEY (tenant, conversation_id) REFERENCES conversations ON DELETE CASCADE
  );
  CREATE INDEX runs_of_conversation ON runs (tenant, conversation_id);
  CREATE INDEX runs_live ON runs (tenant, conversation_id) WHERE status IN ('running', 'suspended', 'interrupted');
  CREATE INDEX runs_running ON runs (owner_id) WHERE status = 'running';
  CREATE INDEX runs_finished ON runs (updated_at) WHERE status NOT IN ('running', 'suspended');
  CREATE TABLE tool_calls (
    tenant text COLLATE "C" NOT NULL, run_id text COLLATE "C" NOT NULL, tool_call_id text COLLATE "C" NOT NULL,
    attempt bigint NOT NULL, conversation_id text COLLATE "C" NOT NULL, tool_name text COLLATE "C" NOT NULL,
    idempotent integer NOT NULL, started_at double precision NOT NULL, status text COLLATE "C" NOT NULL,
    committed_at double precision,
    PRIMARY KEY (tenant, run_id, tool_call_id, attempt),
    FOREIGN KEY (tenant, conversation_id) REFERENCES conversations ON DELETE CASCADE
  );
  CREATE INDEX tool_calls_by_conversation ON tool_calls (tenant, conversation_id);
  CREATE INDEX tool_calls_by_status ON tool_calls (status, committed_at);
  CREATE TABLE requests (
    tenant text COLLATE "C" NOT NULL, request_id text COLLATE "C" NOT NULL, conversation_id text COLLATE "C" NOT NULL,
    status text COLLATE "C" NOT NULL, opened_at double precision NOT NULL, closed_at double precision, json text NOT NULL,
    PRIMARY KEY (tenant, request_id),
    FOREIGN KEY (tenant, conversation_id) REFERENCES conversations ON DELETE CASCADE
  );
  CREATE INDEX requests_open ON requests (tenant, status, opened_at, request_id);
  CREATE INDEX requests_by_conversation ON requests (tenant, conversation_id, status);
  CREATE INDEX requests_closed ON requests (closed_at) WHERE status <> 'open';
  -- A display message saved alone (saveMessage) in one statement, one round trip: lock (or create)
  -- the conversation's row, as every writer of it does first, then append to the agent's last
  -- chunk while it stays within 2,048 bytes, else start the next chunk. True when the conversation
  -- was new. Its tables are this schema's, whatever the caller's search_path.
  CREATE FUNCTION append_messages(p_tenant text, p_conversation text, p_agent text, p_text text, p_count bigint)
  RETURNS boolean LANGUAGE plpgsql AS $fn$
  DECLARE created boolean;
  BEGIN
    INSERT INTO conversations AS c (tenant, conversation_id) VALUES (p_tenant, p_conversation)
      ON CONFLICT (tenant, conversation_id) DO UPDATE SET tenant = excluded.tenant WHERE false
      RETURNING true INTO created;
    UPDATE messages SET json = json || p_text, count = count + p_count
      WHERE tenant = p_tenant AND conversation_id = p_conversation AND agent_id = p_agent
        AND chunk = (SELECT max(chunk) FROM messages
          WHERE tenant = p_tenant AND conversation_id = p_conversation AND agent_id = p_agent)
        AND octet_length(json) + octet_length(p_text) <= 2048;
    IF NOT FOUND THEN
      INSERT INTO messages (tenant, conversation_id, agent_id, chunk, count, json)
        VALUES (p_tenant, p_conversation, p_agent, coalesce((SELECT max(chunk) FROM messages
          WHERE tenant = p_tenant AND conversation_id = p_conversation AND agent_id = p_agent), 0) + 1, p_count, p_text);
    END IF;
    RETURN coalesce(created, false);
  END
  $fn$;
  ALTER FUNCTION append_messages(text, text, text, text, bigint) SET search_path FROM CURRENT;
  `,
  },
];

/**
 * The schema version this code creates and reads: the SQLite store's version of the same logical
 * schema. A database with a higher version was written by a newer Troupe and is refused at open
 * with `ERR_STORE_VERSION`.
 *
 * @example
 * ```ts
 * import { SCHEMA_VERSION } from '@troupe/postgres'
 * console.log(`this build reads PostgreSQL stores up to schema version ${SCHEMA_VERSION}`)
 * ```
 */
export const SCHEMA_VERSION: number = MIGRATIONS[MIGRATIONS.length - 1]?.version ?? 0;
