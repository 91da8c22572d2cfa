// What a worker hands back as its run's result is the worker's word about
// its own run, nothing more: a forged result may end that run as it says,
// but it never throws on the supervisor thread, leaves a run hanging, or
// gives the supervisor objects that are not what they claim.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { HostOp, PROTOCOL_VERSION } from '@troupe/core/internal';
import { echo } from '../fixtures/agents/basic.js';
import { intruder } from '../fixtures/agents/hostile.js';
import { type Hostile, hostileSupervisor, nextFault, processFaults } from './hostileSupervisor.js';

const failed = (error: unknown) => ['failed', PROTOCOL_VERSION, 1, null, null, 0, error];

describe('a forged result', () => {
  let h: Hostile;
  before(async () => {
    h = await hostileSupervisor({ pool: { threads: 2 } });
  });
  after(async () => {
    await h.supervisor.destroy();
  });

  it('a done result whose updates are an empty array of length 2^32 − 1 is refused at once, not walked', async () => {
    // Structured clone carries the length for nothing; walking it (a schema, an `every`) held the
    // supervisor thread for over a minute while an honest run on the other thread waited.
    const honest = h.supervisor.spawn(echo, { input: 'beside it', scope: { tenant: 'x' } });
    const outcome = await h.supervisor.spawn(intruder, {
      input: JSON.stringify({ tool: 'forgeResult', args: { sparse: true }, bait: false }),
      scope: { tenant: 'forger' },
      timeoutMs: 20_000,
    });
    assert.equal(outcome.status, 'crashed', 'a malformed result is a defect of its worker');
    assert.match(outcome.status === 'crashed' ? outcome.error.message : '', /hole|elements/);
    const ok = await honest;
    assert.equal(ok.status === 'done' && ok.result, 'echo: beside it', JSON.stringify(ok));
  });

  it('the same through the host channel: a held result and an event batch holding it are refused, the worker recycled', async () => {
    for (const message of [
      [HostOp.holding, 0, '$cap', ['done', PROTOCOL_VERSION, 1, null, null, 0, 'held', '$sparse']],
      [HostOp.events, 0, '$cap', '$sparse'],
    ]) {
      const from = h.refused.length;
      const outcome = await h.supervisor.spawn(intruder, {
        // The tool holds its thread until the refusal recycles it: the run cannot end before.
        input: JSON.stringify({ tool: 'attack', args: { on: 'host', message, hold: true } }),
        scope: { tenant: 'holder' },
        timeoutMs: 20_000,
      });
      assert.equal(outcome.status, 'crashed', 'the run ends with its recycled thread');
      const refusal = h.refused.slice(from).find((r) => /hole|elements/.test(r.reason));
      assert.ok(
        refusal !== undefined,
        `no refusal for op ${String(message[0])}: ${JSON.stringify(h.refused.slice(from))}`,
      );
      assert.equal(refusal.recycled, true);
    }
  });

  for (const name of ['toString', 'constructor', '__proto__', 'hasOwnProperty', 'valueOf']) {
    it(`failing with an error named "${name}" ends the run failed, with an Error`, async () => {
      const unhandled = processFaults.unhandled.length;
      const outcome = await h.supervisor.spawn(intruder, {
        input: JSON.stringify({
          tool: 'forgeResult',
          args: { result: failed({ name, message: 'forged', code: 'ERR_FORGED' }) },
          bait: false,
        }),
        scope: { tenant: 'forger' },
      });
      assert.equal(outcome.status, 'failed');
      if (outcome.status !== 'failed') return;
      assert.ok(outcome.error instanceof Error, 'the supervisor rebuilt an Error');
      assert.equal(outcome.error.message, 'forged');
      assert.equal(outcome.error.name, name);
      assert.equal(processFaults.unhandled.length, unhandled);
      assert.equal(h.supervisor.stats().runs, 0);
    });
  }

  it('an error whose data carries a __proto__ key keeps its class', async () => {
    const shape = JSON.parse(
      '{"name":"ModelError","message":"forged","code":"ERR_MODEL","data":{"__proto__":{"forged":true},"status":500}}',
    );
    const outcome = await h.supervisor.spawn(intruder, {
      input: JSON.stringify({ tool: 'forgeResult', args: { result: failed(shape) }, bait: false }),
      scope: { tenant: 'forger' },
    });
    assert.equal(outcome.status, 'failed');
    if (outcome.status !== 'failed') return;
    assert.ok(outcome.error instanceof Error);
    assert.equal((outcome.error as { forged?: unknown }).forged, undefined);
    assert.equal((outcome.error as { status?: unknown }).status, 500);
  });

  it('an error with a cause chain deeper than the supervisor checks ends the run crashed, not hanging', async () => {
    const fault = nextFault().then((f) => ({ fault: f }));
    const outcome = await Promise.race([
      h.supervisor.spawn(intruder, {
        input: JSON.stringify({ tool: 'forgeResult', args: { causes: 1_500 }, bait: false }),
        scope: { tenant: 'forger' },
      }),
      fault,
    ]);
    assert.equal('status' in outcome && outcome.status, 'crashed');
    assert.equal(h.supervisor.stats().runs, 0);
  });

  it('the same, held: a held result with that error is refused and its worker recycled', async () => {
    const from = h.refused.length;
    const fault = nextFault().then((f) => ({ fault: f }));
    const outcome = await Promise.race([
      h.supervisor.spawn(intruder, {
        input: JSON.stringify({
          tool: 'attack',
          args: {
            on: 'host',
            message: [HostOp.holding, 0, '$cap', ['failed', PROTOCOL_VERSION, 1, null, null, 0, '$causes']],
            deep: 1_500,
            hold: true,
          },
        }),
        scope: { tenant: 'holder' },
        timeoutMs: 20_000,
      }),
      fault,
    ]);
    assert.equal('status' in outcome && outcome.status, 'crashed');
    assert.ok(h.refused.slice(from).some((r) => r.recycled));
  });

  it('after them, normal runs go on and nothing is left', async () => {
    const ok = await h.supervisor.spawn(echo, { input: 'after', scope: { tenant: 'x' } });
    assert.equal(ok.status === 'done' && ok.result, 'echo: after');
    const stats = h.supervisor.stats();
    assert.equal(stats.runs, 0);
    assert.equal(stats.pool.tableSize, 0);
  });
});

describe('a forged result and the run queued behind it on the same thread', () => {
  it('the thread is recycled before it is handed the next run: that run starts on a fresh thread and finishes', async () => {
    // One thread: the honest run waits for it behind the forger. A result read only after piscina
    // had handed the thread its next task took that task down with the thread (crashed, exit 1).
    const h = await hostileSupervisor({ pool: { threads: 1 } });
    try {
      const forged = h.supervisor.spawn(intruder, {
        input: JSON.stringify({ tool: 'forgeResult', args: { sparse: true }, bait: false }),
        scope: { tenant: 'forger' },
        timeoutMs: 20_000,
      });
      const honest = h.supervisor.spawn(echo, { input: 'queued behind it', scope: { tenant: 'x' } });
      assert.equal((await forged).status, 'crashed');
      const ok = await honest;
      assert.equal(ok.status === 'done' && ok.result, 'echo: queued behind it', JSON.stringify(ok));
      assert.equal(h.recycled.length, 1);
    } finally {
      await h.supervisor.destroy();
    }
  });
});

describe('a hostile host message posted just before the result, and the run queued behind it on the same thread', () => {
  it('the message is handled before the result: the thread is recycled before it is handed the next run', async () => {
    // One thread. The worker posts an unknown operation on its host channel, then its result on
    // piscina's port: the result was read first (the ports are read in turn, piscina's first), the
    // thread freed and handed the honest run, and then the host message recycled it (crashed).
    const h = await hostileSupervisor({ pool: { threads: 1 } });
    try {
      const hostile = h.supervisor.spawn(intruder, {
        input: JSON.stringify({ tool: 'attack', args: { on: 'hostLast', message: [99, 0, '$cap', null] } }),
        scope: { tenant: 'attacker' },
        timeoutMs: 20_000,
      });
      const honest = h.supervisor.spawn(echo, { input: 'behind a late hostile message', scope: { tenant: 'x' } });
      const end = await hostile;
      assert.equal(end.status, 'crashed', JSON.stringify(end));
      const ok = await honest;
      assert.equal(ok.status === 'done' && ok.result, 'echo: behind a late hostile message', JSON.stringify(ok));
      assert.equal(h.recycled.length, 1);
      assert.match(h.refused[0]?.reason ?? '', /operation|op/, JSON.stringify(h.refused));
    } finally {
      await h.supervisor.destroy();
    }
  });
});
