// A hostile worker host against the API host: whatever it publishes on the
// owner's channel — garbage, structured-clone oddities, sparse or huge arrays,
// deep nesting, replays, forged capabilities, floods — the API host survives,
// refuses and counts it, serves nothing of it, and an honest attempt beside it
// goes on. (fast-check drives the messages; every run is against a real Redis.)
import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { serialize } from 'node:v8';
import { bullmqTransport } from '@troupe/bullmq';
import fc from 'fast-check';
import { type RedisServer, startRedis } from '../servers/redis.js';
import { makeAttempt, PeerHost, transportHost } from './peer.js';

let redis: RedisServer;
before(async () => {
  redis = await startRedis();
});
after(async () => {
  await redis.stop();
});

/** Values structured clone carries that JSON does not, and shapes that are hard to walk. */
const odd = fc.oneof(
  fc.constant(new Map([[1, { a: 1 }]])),
  fc.constant(new Set([1, 2])),
  fc.constant(new Date(0)),
  fc.constant(10n),
  fc.constant(new Uint8Array(8)),
  fc.constant(/re/g),
  fc.constant(undefined),
  fc.constant(null),
  fc.constant(Number.NaN),
  fc.constant(
    (() => {
      const sparse: unknown[] = [];
      sparse.length = 2 ** 32 - 1;
      return sparse;
    })(),
  ),
  fc.constant(
    (() => {
      let deep: unknown = 'leaf';
      for (let i = 0; i < 5_000; i++) deep = [deep];
      return deep;
    })(),
  ),
  fc.string(),
  fc.integer(),
);
const kind = fc.constantFrom('approve', 'task', 'events', 'checkpoint', 'placed', 'end', 'handback', 'bogus');
const hostile = (jobId: string, capability: string) =>
  fc.oneof(
    fc.tuple(
      fc.constant('relay'),
      fc.constant(jobId),
      fc.constant(capability),
      fc.integer({ min: -2, max: 5 }),
      kind,
      odd,
    ),
    fc.tuple(
      fc.constant('relay'),
      fc.constant(jobId),
      fc.string({ minLength: 24, maxLength: 24 }),
      fc.nat(5),
      kind,
      odd,
    ),
    fc.tuple(fc.constant('claim'), fc.constant(1), fc.constant(jobId), fc.string(), fc.string(), odd),
    fc.tuple(fc.constant('refuse'), odd, odd, odd, odd, odd),
    fc.array(odd, { maxLength: 8 }),
    odd,
  );

it('the API host survives any message on its channel, refuses it, and the honest attempt beside it goes on', async () => {
  const transport = bullmqTransport({ connection: redis.url, build: 'b1', queue: 'hostile', leaseCheckMs: 50 });
  const host = transportHost();
  transport.start(host);
  await transport.ready();
  const peer = await PeerHost.connect(redis.url, 'hostile-host', 'troupe', 'hostile');
  const honest = await PeerHost.connect(redis.url, 'honest-host', 'troupe', 'hostile');
  const owner = transport.options.ownerId;
  try {
    await honest.lease(1, 60_000);
    await peer.lease(1, 60_000);
    // The honest attempt, granted to the honest host.
    const good = makeAttempt();
    const goodHandle = transport.dispatch(good.attempt);
    const goodJob = `${good.attempt.runId}.1`;
    await honest.claim(owner, goodJob, await honest.nonce(goodJob), 'b1');
    const goodCap = (await honest.next('grant', goodJob))[3].capability;
    // The hostile host's own attempt, whose capability it knows.
    const bad = makeAttempt();
    const badHandle = transport.dispatch(bad.attempt);
    const badJob = `${bad.attempt.runId}.1`;
    await peer.claim(owner, badJob, await peer.nonce(badJob), 'b1');
    const badCap = (await peer.next('grant', badJob))[3].capability;
    let sent = 0;
    await fc.assert(
      fc.asyncProperty(hostile(badJob, badCap), async (message) => {
        let bytes: Buffer;
        try {
          bytes = serialize(message);
        } catch {
          return; // Not even sendable.
        }
        await peer.command('PUBLISH', peer.names.toOwner(owner), bytes as unknown as string);
        sent++;
      }),
      { numRuns: 300, seed: 20261206 },
    );
    // Everything it sent is read before this honest message is (one publisher per channel in order
    // is not promised across connections: wait until the honest call is served, then count).
    await honest.relay(owner, goodJob, goodCap, 1, 'approve', { toolName: 'ship', toolCallId: 'c1', arguments: {} });
    assert.deepEqual(await honest.ack(goodJob, 1), [1, { decision: 'approve' }]);
    assert.ok(sent > 200, `${sent} messages sent`);
    assert.ok(transport.stats().refused > 0, 'refusals were counted');
    // The honest attempt saw nothing of it, and still ends as its host says.
    assert.deepEqual(good.served.events, []);
    assert.equal(good.served.approvals.length, 1);
    const end = (await import('@troupe/bullmq/internal')).encodeEnd({
      end: { status: 'incomplete', events: [], turns: 16 },
      usage: { inputTokens: 0, outputTokens: 0 },
    });
    await honest.relay(owner, goodJob, goodCap, 2, 'end', end);
    assert.equal((await goodHandle.ended).end.status, 'incomplete');
    // The hostile host's attempt was fenced (crashed) or handed back (lost) by what it sent; never `done`.
    const badEnd = (await Promise.race([badHandle.ended, Promise.resolve(undefined)]))?.end.status;
    assert.ok(badEnd === undefined || badEnd === 'crashed' || badEnd === 'lost', String(badEnd));
  } finally {
    await transport.destroy();
    await peer.close();
    await honest.close();
  }
});
