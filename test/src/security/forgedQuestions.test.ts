// Issue 11, item 3 and the README's bound: "more than 1,024 questions in one
// dispatch ... is refused", and every question is a checked `Request`. A
// worker's suspended result carries its loop state, and the supervisor opens
// a request for each open call of it that names one — unchecked and
// uncounted: the same worker that may ask 1,024 questions on its host
// channel opens any number through its state, and requests of any shape.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { PROTOCOL_VERSION } from '@troupe/core/internal';
import { MAX_QUESTIONS_PER_DISPATCH } from '@troupe/supervisor/internal';
import { prober } from '../fixtures/agents/hostileProbe.js';
import { type Hostile, hostileSupervisor } from './hostileSupervisor.js';

const request = { id: 'q', kind: 'input', prompt: 'p' };

function suspendedWith(pending: unknown[]): unknown[] {
  return [
    'suspended',
    PROTOCOL_VERSION,
    1,
    null,
    null,
    0,
    request,
    { agentId: 'prober', messages: [], metadata: {}, pending },
  ];
}

describe('questions opened from a forged suspended state', () => {
  let h: Hostile;
  before(async () => {
    h = await hostileSupervisor({ pool: { threads: 2 } });
  });
  after(async () => {
    await h.supervisor.destroy();
  });

  it(`open no more requests than one dispatch may ask (${MAX_QUESTIONS_PER_DISPATCH})`, async () => {
    const count = 4 * MAX_QUESTIONS_PER_DISPATCH;
    const pending = Array.from({ length: count }, (_, i) => ({
      call: { id: `c${i}`, name: 'lookup', arguments: {} },
      request: { id: `r${i}`, kind: 'input', prompt: 'p' },
    }));
    const before = h.supervisor.pendingRequests().length;
    const outcome = await h.supervisor.spawn(prober, {
      input: JSON.stringify({ calls: [{ name: 'forge', args: { result: suspendedWith(pending) } }] }),
      scope: { tenant: 'forger' },
    });
    const opened = h.supervisor.pendingRequests().length - before;
    assert.ok(
      opened <= MAX_QUESTIONS_PER_DISPATCH,
      `one dispatch opened ${opened} requests through its state (outcome ${outcome.status})`,
    );
  });

  it('open only requests that are Requests (kind and prompt strings)', async () => {
    const seen: unknown[] = [];
    const on = (e: { request: unknown }) => seen.push(e.request);
    h.supervisor.on('request.opened', on);
    try {
      const pending = [
        { call: { id: 'c', name: 'lookup', arguments: {} }, request: { id: 'r', kind: 42, prompt: { not: 'text' } } },
      ];
      await h.supervisor.spawn(prober, {
        input: JSON.stringify({ calls: [{ name: 'forge', args: { result: suspendedWith(pending) } }] }),
        scope: { tenant: 'forger' },
      });
    } finally {
      h.supervisor.off('request.opened', on);
    }
    for (const r of seen) {
      const { kind, prompt } = r as { kind: unknown; prompt: unknown };
      assert.equal(typeof kind, 'string', `the host was handed a request ${JSON.stringify(r)}`);
      assert.equal(typeof prompt, 'string', `the host was handed a request ${JSON.stringify(r)}`);
    }
  });
});
