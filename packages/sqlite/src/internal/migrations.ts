// The schema as data only, apart from the code that applies it: the public
// SCHEMA_VERSION comes from here, so the package's type declarations do not
// reach better-sqlite3's (which a consumer need not install).

/**
 * Numbered migrations, applied in order at open inside one transaction. A
 * migration is never edited once shipped: a change is a new entry. The
 * fixture database of every shipped version is checked in under
 * `test/src/persistence/fixtures/` and read by a test.
 *
 * Every table is keyed by `tenant` first (the integrator's tenant key); the
 * scope itself has no column anywhere. Rows hang off their conversation so a
 * deletion cascades. Tables holding JSON documents keep a rowid: a
 * `WITHOUT ROWID` table stores less of a large row per page, so a 10 KB
 * state would spill into more overflow pages.
 */
export const MIGRATIONS: readonly string[] = [
  // 1: the first schema.
  `
  CREATE TABLE troupe_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
  CREATE TABLE owners (
    owner_id TEXT PRIMARY KEY, pid INTEGER NOT NULL, pid_start TEXT NOT NULL, opened_at REAL NOT NULL
  ) WITHOUT ROWID;
  CREATE TABLE conversations (
    tenant TEXT NOT NULL, conversation_id TEXT NOT NULL,
    agent_id TEXT, agent_name TEXT, status TEXT, updated_at REAL,
    PRIMARY KEY (tenant, conversation_id)
  ) WITHOUT ROWID;
  CREATE INDEX conversations_by_time ON conversations (tenant, updated_at DESC, conversation_id);
  CREATE TABLE states (
    tenant TEXT NOT NULL, conversation_id TEXT NOT NULL, agent_id TEXT NOT NULL,
    version INTEGER NOT NULL, json TEXT NOT NULL,
    PRIMARY KEY (tenant, conversation_id, agent_id),
    FOREIGN KEY (tenant, conversation_id) REFERENCES conversations ON DELETE CASCADE
  );
  CREATE TABLE messages (
    id INTEGER PRIMARY KEY, tenant TEXT NOT NULL, conversation_id TEXT NOT NULL, agent_id TEXT NOT NULL,
    json TEXT NOT NULL,
    FOREIGN KEY (tenant, conversation_id) REFERENCES conversations ON DELETE CASCADE
  );
  CREATE INDEX messages_by_agent ON messages (tenant, conversation_id, agent_id, id);
  CREATE TABLE runs (
    tenant TEXT NOT NULL, run_id TEXT NOT NULL, conversation_id TEXT NOT NULL,
    status TEXT NOT NULL, attempt INTEGER NOT NULL, updated_at REAL NOT NULL, owner_id TEXT NOT NULL,
    json TEXT NOT NULL,
    PRIMARY KEY (tenant, run_id),
    FOREIGN KEY (tenant, conversation_id) REFERENCES conversations ON DELETE CASCADE
  );
  CREATE INDEX runs_by_conversation ON runs (tenant, conversation_id, status);
  CREATE INDEX runs_by_status ON runs (status, updated_at);
  CREATE TABLE tool_calls (
    tenant TEXT NOT NULL, run_id TEXT NOT NULL, tool_call_id TEXT NOT NULL, attempt INTEGER NOT NULL,
    conversation_id TEXT NOT NULL, tool_name TEXT NOT NULL, idempotent INTEGER NOT NULL,
    started_at REAL NOT NULL, status TEXT NOT NULL, committed_at REAL,
    PRIMARY KEY (tenant, run_id, tool_call_id, attempt),
    FOREIGN KEY (tenant, conversation_id) REFERENCES conversations ON DELETE CASCADE
  ) WITHOUT ROWID;
  CREATE INDEX tool_calls_by_conversation ON tool_calls (tenant, conversation_id);
  CREATE INDEX tool_calls_by_status ON tool_calls (status, committed_at);
  CREATE TABLE requests (
    tenant TEXT NOT NULL, request_id TEXT NOT NULL, conversation_id TEXT NOT NULL,
    status TEXT NOT NULL, opened_at REAL NOT NULL, closed_at REAL, json TEXT NOT NULL,
    PRIMARY KEY (tenant, request_id),
    FOREIGN KEY (tenant, conversation_id) REFERENCES conversations ON DELETE CASCADE
  );
  CREATE INDEX requests_open ON requests (tenant, status, opened_at, request_id);
  CREATE INDEX requests_by_conversation ON requests (tenant, conversation_id, status);
  CREATE INDEX requests_closed ON requests (status, closed_at);
  `,
  // 2: a state's revision, counted up by every save: a save based on another revision is fenced
  // (a stale copy of a conversation never overwrites a newer turn). Rows saved before count as 1.
  `
  ALTER TABLE states ADD COLUMN revision INTEGER NOT NULL DEFAULT 1;
  `,
  // 3: a state's messages in rows of their own, so that a turn writes the messages it added, not
  // the whole transcript again. A state saved this way holds the number of its messages where the
  // list was (state.messages: n); one saved before holds the list, and is read as it was. `writer`
  // is the store that wrote the rows (its owner id): only that store appends to them.
  `
  ALTER TABLE states ADD COLUMN writer TEXT;
  CREATE TABLE state_messages (
    id INTEGER PRIMARY KEY, tenant TEXT NOT NULL, conversation_id TEXT NOT NULL, agent_id TEXT NOT NULL,
    seq INTEGER NOT NULL, json TEXT NOT NULL,
    FOREIGN KEY (tenant, conversation_id) REFERENCES conversations ON DELETE CASCADE
  );
  CREATE UNIQUE INDEX state_messages_by_agent ON state_messages (tenant, conversation_id, agent_id, seq);
  `,
  // 4: a run's indexes hold what they are read for, so that a turn that saves a run again writes
  // less. Its conversation's rows (a deletion's cascade) by a key no save changes; the live runs (a
  // restore, markInterrupted) in a partial index that a finished run is not in, so a finished run
  // saved again never touches it; the finished runs (pruning) by time. Closed requests by time
  // too: pruning them read every request (a range on status cannot exclude one value). Each query
  // names its index's condition in its WHERE, so the planner can use it.
  `
  DROP INDEX runs_by_conversation;
  DROP INDEX runs_by_status;
  DROP INDEX requests_closed;
  CREATE INDEX requests_closed ON requests (closed_at) WHERE status != 'open';
  CREATE INDEX runs_of_conversation ON runs (tenant, conversation_id);
  CREATE INDEX runs_live ON runs (tenant, conversation_id) WHERE status IN ('running', 'suspended', 'interrupted');
  CREATE INDEX runs_finished ON runs (updated_at) WHERE status NOT IN ('running', 'suspended');
  `,
  // 5: a transcript in chunks, so that a saved message rewrites one row in place instead of adding
  // a row and an index entry (an entry among every conversation's: each insert into a full page
  // rebalanced it with its siblings, two pages a turn). A chunk holds one message's JSON per line
  // (JSON.stringify never writes a raw newline), `count` of them, up to 2 KiB; a save appends to its
  // agent's last chunk while it fits, and starts the next one when not. A message migrated from a
  // row of its own is a chunk of its own; a raw newline in its JSON (valid JSON) can only be
  // whitespace between tokens, so a space keeps the same value. A row that is not valid JSON text
  // is kept as it is, without its line's end: it reads as damaged, as it did.
  `
  CREATE TABLE message_chunks (
    tenant TEXT NOT NULL, conversation_id TEXT NOT NULL, agent_id TEXT NOT NULL, chunk INTEGER NOT NULL,
    count INTEGER NOT NULL, json TEXT NOT NULL,
    PRIMARY KEY (tenant, conversation_id, agent_id, chunk),
    FOREIGN KEY (tenant, conversation_id) REFERENCES conversations ON DELETE CASCADE
  );
  INSERT INTO message_chunks (tenant, conversation_id, agent_id, chunk, count, json)
    SELECT tenant, conversation_id, agent_id,
      row_number() OVER (PARTITION BY tenant, conversation_id, agent_id ORDER BY id), 1,
      CASE WHEN typeof(json) = 'text' AND json_valid(json) THEN replace(json, char(10), ' ') || char(10) ELSE json END
    FROM messages;
  DROP TABLE messages;
  ALTER TABLE message_chunks RENAME TO messages;
  `,
  // 6: a saved state's messages in chunks too, as a transcript's (migration 5): a turn appends the
  // messages it added to the state's last chunk. A row migrates to a chunk of one numbered by its
  // place (seq + 1), so a row missing from the old table is a chunk missing from the new one, read
  // as damaged, as it was; a row whose seq is not an integer (the old column could hold text) gets a
  // number no place has (-id), read as damaged too, and never collides with another.
  `
  CREATE TABLE state_message_chunks (
    tenant TEXT NOT NULL, conversation_id TEXT NOT NULL, agent_id TEXT NOT NULL, chunk INTEGER NOT NULL,
    count INTEGER NOT NULL, json TEXT NOT NULL,
    PRIMARY KEY (tenant, conversation_id, agent_id, chunk),
    FOREIGN KEY (tenant, conversation_id) REFERENCES conversations ON DELETE CASCADE
  );
  INSERT INTO state_message_chunks (tenant, conversation_id, agent_id, chunk, count, json)
    SELECT tenant, conversation_id, agent_id, CASE WHEN typeof(seq) = 'integer' THEN seq + 1 ELSE -id END, 1,
      CASE WHEN typeof(json) = 'text' AND json_valid(json) THEN replace(json, char(10), ' ') || char(10) ELSE json END
    FROM state_messages;
  DROP TABLE state_messages;
  ALTER TABLE state_message_chunks RENAME TO state_messages;
  `,
];

/**
 * The schema version this code creates and reads: the number of migrations.
 * A file with a higher version was written by a newer Troupe and is refused
 * at open with `ERR_STORE_VERSION`.
 *
 * @example
 * ```ts
 * import { SCHEMA_VERSION } from '@troupe/sqlite'
 * console.log(`this build reads SQLite stores up to schema version ${SCHEMA_VERSION}`)
 * ```
 */
export const SCHEMA_VERSION = MIGRATIONS.length;
