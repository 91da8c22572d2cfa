// Tenant isolation in the PostgreSQL store's SQL: every statement that reads or writes a
// conversation's rows names the tenant (the first key of every table) — those that may span
// tenants (maintenance: pruning, marking a dead host's runs) only when the caller asked for all,
// and then with the tenant as a parameter that narrows them when given.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { statementsFor } from '../../../packages/postgres/dist/internal/statements.js';

const SQL = statementsFor('s');
// Owners are hosts, not tenants' rows; `interrupt` writes the rows `orphanedRuns` chose, by (tenant, run_id).
const NOT_TENANT_ROWS = new Set(['addOwner', 'renewOwner', 'dropOwner', 'dropExpiredOwners']);
// Every tenant when the caller passes none (a daemon's startup, a retention job); one when it does.
const ALL_OR_ONE = new Set(['orphanedRuns', 'pruneRuns', 'pruneCalls', 'pruneRequests']);

describe('PostgresPersistence: every statement is keyed by tenant', () => {
  for (const [name, sql] of Object.entries(SQL)) {
    if (NOT_TENANT_ROWS.has(name)) continue;
    it(name, () => {
      const text = sql.replace(/\s+/g, ' ');
      if (ALL_OR_ONE.has(name)) {
        assert.match(text, /\(\$(\d)::text IS NULL OR tenant = \$\1\)/, `${name} narrows to a tenant when given one`);
      } else if (name === 'interrupt') {
        assert.match(text, /r\.tenant = u\.tenant AND r\.run_id = u\.run_id/);
      } else if (name === 'appendMessagesAlone') {
        assert.match(text, /append_messages\(\$1,/);
      } else if (/^\s*INSERT/i.test(sql)) {
        assert.match(text, /\(tenant, /, `${name} writes the tenant first`);
      } else {
        // Every table it reads is filtered by tenant: as many tenant conditions as tables named.
        // (owners are hosts: a liveness check reads them by owner id.)
        const tables = (text.match(/\b(FROM|UPDATE|JOIN) "s"\.\w+/g) ?? []).filter((t) => !t.endsWith('.owners'));
        const keyed = text.match(/\b(\w+\.)?tenant = (\$\d+|\w+\.tenant)/g) ?? [];
        assert.ok(tables.length > 0, `${name} names a table`);
        assert.ok(keyed.length >= tables.length, `${name}: ${tables.length} tables, ${keyed.length} tenant conditions`);
      }
    });
  }
});
