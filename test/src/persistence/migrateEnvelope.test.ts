import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isTroupeError } from '@troupe/core';
import { migrateEnvelope, READABLE_STATE_VERSIONS, STATE_ENVELOPE_VERSION } from '@troupe/supervisor';
import { ctx, envelope } from './records.js';

const c = ctx('c1');
const { version: _v, status: _s, waitingOn: _w, runId: _r, ...v1Fields } = envelope(c);

describe('migrateEnvelope', () => {
  it('returns a current envelope as it is', () => {
    const e = envelope(c);
    assert.equal(migrateEnvelope(e), e);
  });

  it('upgrades version 1: suspended with waitingOn when a request was pending', () => {
    const pendingRequest = { request: { id: 'ask', kind: 'input', prompt: '?' }, path: [c.agentId], openedAt: 1 };
    const up = migrateEnvelope({ version: 1, ...v1Fields, pendingRequest });
    assert.deepEqual(
      [up.version, up.status, up.waitingOn, up.runId],
      [STATE_ENVELOPE_VERSION, 'suspended', 'ask', undefined],
    );
    assert.deepEqual(up.pendingRequest, pendingRequest);
  });

  it('upgrades version 1: idle when nothing was pending', () => {
    const up = migrateEnvelope({ version: 1, ...v1Fields, pendingRequest: undefined });
    assert.deepEqual([up.status, up.waitingOn], ['idle', undefined]);
  });

  it('refuses a newer version with ERR_STORE_VERSION naming what it reads', () => {
    assert.throws(
      () => migrateEnvelope({ ...envelope(c), version: 3 }),
      (e: unknown) =>
        isTroupeError(e, 'ERR_STORE_VERSION') && (e as Error).message.includes(READABLE_STATE_VERSIONS.join(', ')),
    );
  });

  it('refuses something that is not an envelope with ERR_STORE_CORRUPT', () => {
    for (const bad of [null, 'x', { version: 'two' }, { version: 0 }]) {
      assert.throws(
        () => migrateEnvelope(bad),
        (e: unknown) => isTroupeError(e, 'ERR_STORE_CORRUPT'),
      );
    }
  });
});
