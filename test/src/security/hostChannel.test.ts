// Issue 11, items 1 and 3: the host channel serves its named operations
// only, with checked arguments; anything else a worker sends — on the host
// channel, on parentPort, on piscina's task port — is refused with a typed
// error (when it asked for a reply), counted in a `host.refused` event, and
// its worker is recycled; the supervisor and every other run go on.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { HOST_OPEN, HostOp, WORKER_READY } from '@troupe/core/internal';
import { MAX_QUESTIONS_PER_DISPATCH } from '@troupe/supervisor/internal';
import { echo } from '../fixtures/agents/basic.js';
import { intruder } from '../fixtures/agents/hostile.js';
import {
  alive,
  type Hostile,
  hostileSupervisor,
  newBoard,
  nextEvent,
  nextFault,
  processFaults,
} from './hostileSupervisor.js';

const scope = Object.freeze({ tenant: 't-host' });
const SEQ = 1_000_000_001;
const LAST_OP = Math.max(...Object.values(HostOp));

/** Spawn the intruder on `input`; its outcome and its board. */
async function intrude(h: Hostile, input: Record<string, unknown>) {
  const board = newBoard();
  const outcome = await h.supervisor.spawn(intruder, {
    input: JSON.stringify(input),
    scope,
    toolContext: { board },
    // A bound, not a wait: if an attack were not refused, the held run would end cancelled here.
    timeoutMs: 20_000,
  });
  return { outcome, board };
}

/**
 * Spawn an intruder whose attack must be refused: its run ends `crashed`
 * (its worker recycled), one `host.refused` event with `reason` says so and
 * names the recycled thread, and the approval handler was asked about
 * nothing but the bait.
 */
async function refused(h: Hostile, input: Record<string, unknown>, reason: RegExp, askedAbout: readonly string[] = []) {
  const from = h.refused.length;
  const { outcome, board } = await intrude(h, input);
  assert.equal(outcome.status, 'crashed', `expected the run to be recycled, it ended ${outcome.status}`);
  if (outcome.status !== 'crashed') throw new Error('unreachable');
  assert.match(outcome.error.message, /was recycled/);
  const mine = h.refused.slice(from);
  const refusal = mine.find((r) => reason.test(r.reason));
  assert.ok(refusal, `no host.refused matching ${reason}; saw ${JSON.stringify(mine.map((r) => r.reason))}`);
  assert.equal(refusal.recycled, true);
  assert.ok(
    h.recycled.some((r) => r.threadId === refusal.threadId && r.reason === 'protocol'),
    'worker.recycled names the thread that sent it',
  );
  assert.deepEqual(
    h.approvals.filter((a) => a.toolName !== 'bait' && !askedAbout.includes(a.toolName)).map((a) => a.toolName),
    [],
    'the approval handler was asked about nothing but the bait (and what the test names)',
  );
  return { outcome, board, refusal };
}

const onHost = (message: unknown, extra: Record<string, unknown> = {}) => ({
  tool: 'attack',
  args: { on: 'host', message, hold: true, ...extra },
});

describe('host channel: named operations only', () => {
  let h: Hostile;
  before(async () => {
    h = await hostileSupervisor({ pool: { threads: 2 } });
  });
  after(async () => {
    await h.supervisor.destroy();
  });

  it('an unknown operation is refused and the worker is recycled', async () => {
    // (The typed ERR_HOST_REFUSED reply is asserted where the thread is not terminated
    // right after it: the stale-capability case and the channel fuzz.)
    const { refusal } = await refused(h, onHost([99, SEQ, '$cap', {}]), /^unknown host operation 99$/);
    assert.equal(refusal.agentId, undefined, 'nothing was looked up for it');
  });

  for (const [what, message, reason] of [
    ['a property read (comlink GET)', { id: 1, type: 'GET', path: ['constructor'] }, /4-element array/],
    [
      'a property write',
      { id: 2, type: 'SET', path: ['__proto__', 'polluted'], value: { type: 'RAW', value: 1 } },
      /4-element array/,
    ],
    [
      'apply on a constructor path',
      { id: 3, type: 'APPLY', path: ['constructor', 'constructor'], argumentList: ['return process'] },
      /4-element array/,
    ],
    [
      'an operation named by string',
      ['approve', SEQ, '$cap', { toolName: 'bait', toolCallId: 'c', arguments: {} }],
      /unknown host operation string/,
    ],
    ['an operation named "constructor"', ['constructor', SEQ, '$cap', {}], /unknown host operation string/],
    [
      'an operation number past the last',
      [LAST_OP + 1, SEQ, '$cap', {}],
      new RegExp(`unknown host operation ${LAST_OP + 1}`),
    ],
    [
      'a call that asks no reply',
      [HostOp.approve, 0, '$cap', { toolName: 'bait', toolCallId: 'c', arguments: {} }],
      /needs a reply/,
    ],
    ['a notice that asks a reply', [HostOp.events, SEQ, '$cap', [['t', 'agent.turn', {}]]], /a notice has seq 0/],
    ['a negative seq', [HostOp.approve, -1, '$cap', {}], /seq must be/],
    ['a fractional seq', [HostOp.approve, 1.5, '$cap', {}], /seq must be/],
    ['a capability of the wrong length', [HostOp.approve, SEQ, 'short', {}], /capability is malformed/],
    ['a capability that is not a string', [HostOp.approve, SEQ, 42, {}], /capability is malformed/],
    ['an extra element', [HostOp.approve, SEQ, '$cap', {}, 'extra'], /4-element array/],
  ] as const) {
    it(`refuses ${what}`, async () => {
      await refused(h, onHost(message), reason);
    });
  }

  for (const [what, message, reason] of [
    [
      'an approval without a tool name',
      [HostOp.approve, SEQ, '$cap', { toolCallId: 'c', arguments: {} }],
      /malformed approval/,
    ],
    [
      'an approval with a 10 KB tool name',
      [HostOp.approve, SEQ, '$cap', { toolName: 'x'.repeat(10_000), toolCallId: 'c', arguments: {} }],
      /malformed approval/,
    ],
    ['a task request that is an array', [HostOp.task, SEQ, '$cap', ['leaf', 'do it']], /malformed task request/],
    [
      'a task request with non-object metadata',
      [HostOp.task, SEQ, '$cap', { subagent: 'leaf', instructions: '', toolCallId: 'c', metadata: [] }],
      /malformed task request/,
    ],
    [
      'an event batch that is not an array',
      [HostOp.events, 0, '$cap', { 0: ['t', 'agent.turn', {}] }],
      /malformed event batch/,
    ],
    ['an empty event batch', [HostOp.events, 0, '$cap', []], /malformed event batch/],
    [
      'a supervisor event forged as telemetry (subagent.done)',
      [HostOp.events, 0, '$cap', [['t', 'subagent.done', { turns: 1 }]]],
      /not a known telemetry event/,
    ],
    [
      'a supervisor event forged as telemetry (request.answered)',
      [HostOp.events, 0, '$cap', [['t', 'request.answered', { requestId: 'r' }]]],
      /not a known telemetry event/,
    ],
    [
      'telemetry named "__proto__"',
      [HostOp.events, 0, '$cap', [['t', '__proto__', {}]]],
      /not a known telemetry event/,
    ],
    [
      'telemetry whose payload is an array',
      [HostOp.events, 0, '$cap', [['t', 'agent.turn', [1, 2]]]],
      /not a known telemetry event/,
    ],
    [
      'a model delta of an unknown type',
      [HostOp.events, 0, '$cap', [['d', [{ type: 'eval', text: 'process.exit()' }]]]],
      /not a model delta/,
    ],
    ['a question without a request', [HostOp.events, 0, '$cap', [['q', 'call-1', { prompt: 'hi' }]]], /a question is/],
    ['an event of an unknown kind', [HostOp.events, 0, '$cap', [['x', 'agent.turn', {}]]], /unknown kind/],
    [
      'a batch over 512 events',
      [HostOp.events, 0, '$cap', Array.from({ length: 513 }, () => ['t', 'agent.turn', {}])],
      /malformed event batch/,
    ],
    ['a held result that is not a result', [HostOp.holding, 0, '$cap', { status: 'done' }], /malformed held result/],
    [
      'a checkpoint without a state',
      [HostOp.checkpoint, SEQ, '$cap', { phase: 'before', calls: [] }],
      /malformed checkpoint/,
    ],
    [
      'a checkpoint of an unknown phase',
      [HostOp.checkpoint, SEQ, '$cap', { phase: 'during', state: { agentId: 'a', messages: [] }, calls: [] }],
      /malformed checkpoint/,
    ],
  ] as const) {
    it(`refuses ${what} and names the run its capability named`, async () => {
      const { outcome, refusal } = await refused(h, onHost(message), reason);
      assert.equal(refusal.agentId, outcome.agentId);
      assert.equal(refusal.runId, outcome.runId);
    });
  }

  it('refuses a flood: over floodLimit messages within a second', async () => {
    const flood = await hostileSupervisor({ pool: { threads: 1, floodLimit: 500 } });
    try {
      const turn = [HostOp.events, 0, '$cap', [['t', 'agent.turn', { turn: 1 }]]];
      const { refusal } = await refused(
        flood,
        onHost(turn, { times: 5_000 }),
        /a flood: over 500 messages, events and deltas/,
      );
      assert.equal(flood.refused.filter((r) => r === refusal).length, 1);
      const ok = await flood.supervisor.spawn(echo, { input: 'after the flood', scope });
      assert.equal(ok.status === 'done' && ok.result, 'echo: after the flood');
    } finally {
      await flood.supervisor.destroy();
    }
  });

  it('counts a flood by the work it carries, not the messages it takes', async () => {
    // 512 deltas a message, 200 messages: far under the limit in messages, far over it in work.
    const flood = await hostileSupervisor({ pool: { threads: 1, floodLimit: 10_000 } });
    try {
      let deltas = 0;
      flood.supervisor.on('model.delta', (e) => {
        deltas += e.deltas.length;
      });
      const { refusal } = await refused(
        flood,
        onHost([HostOp.events, 0, '$cap', ['$deltas']], { times: 200 }),
        /a flood: over 10000 messages, events and deltas/,
      );
      assert.equal(refusal.recycled, true);
      assert.ok(deltas <= 10_000, `${deltas} deltas were served before the flood was refused`);
    } finally {
      await flood.supervisor.destroy();
    }
  });

  it(`refuses more questions than one dispatch can ask (${MAX_QUESTIONS_PER_DISPATCH}), under any flood limit`, async () => {
    let opened = 0;
    const count = () => opened++;
    h.supervisor.on('request.opened', count);
    try {
      await refused(
        h,
        onHost([HostOp.events, 0, '$cap', '$questions'], { times: 3 }),
        /over 1024 questions in one dispatch/,
      );
      assert.ok(opened <= MAX_QUESTIONS_PER_DISPATCH, `${opened} requests opened`);
      assert.equal(h.supervisor.pendingRequests().length, 0);
    } finally {
      h.supervisor.off('request.opened', count);
    }
  });

  it('refuses a second approval of the same call in one dispatch', async () => {
    const ask = [HostOp.approve, SEQ, '$cap', { toolName: 'bait', toolCallId: 'twice', arguments: {} }];
    await refused(h, onHost(ask, { times: 2 }), /a second approval of call twice/);
  });

  it('refuses a second question for the same call in one dispatch (a request that would outlive its run)', async () => {
    const q = (id: string) => ['q', 'call-twice', { id, kind: 'input', prompt: 'again?' }];
    await refused(
      h,
      onHost([HostOp.events, 0, '$cap', [q('first'), q('second')]]),
      /a second question for call call-twice/,
    );
  });

  it('refuses a question for a call that waits on its approval, and an approval after a question', async () => {
    const asking = await hostileSupervisor({ pool: { threads: 1 } }, () => ({ decision: 'ask', prompt: 'allow?' }));
    try {
      const approve = [HostOp.approve, SEQ, '$cap', { toolName: 'drop_table', toolCallId: 'X', arguments: {} }];
      const question = [HostOp.events, 0, '$cap', [['q', 'X', { id: 'mine', kind: 'input', prompt: 'p' }]]];
      // (The approval's reply first: the handler has said `ask` when the question comes.)
      await refused(
        asking,
        { tool: 'attack', args: { on: 'host', message: [approve, question], sequence: true, hold: true } },
        /a question for call X, which waits on its approval/,
        ['drop_table'],
      );
      assert.equal(asking.supervisor.pendingRequests().length, 0, 'none outlives the run');
      await refused(
        asking,
        { tool: 'attack', args: { on: 'host', message: [question, approve], sequence: true, hold: true } },
        /an approval of call X after its question/,
        ['drop_table'],
      );
      assert.equal(asking.supervisor.pendingRequests().length, 0);
    } finally {
      await asking.supervisor.destroy();
    }
  });

  it(`counts approvals the handler answers with "ask" as questions: past ${MAX_QUESTIONS_PER_DISPATCH}, refused`, async () => {
    const asking = await hostileSupervisor({ pool: { threads: 1 } }, () => ({ decision: 'ask', prompt: 'allow?' }));
    try {
      let opened = 0;
      asking.supervisor.on('request.opened', () => opened++);
      const ask = [HostOp.approve, SEQ, '$cap', { toolName: 'drop_table', toolCallId: '$n', arguments: {} }];
      await refused(asking, onHost(ask, { times: 2_000 }), /over 1024 questions in one dispatch/, ['drop_table']);
      assert.ok(opened <= MAX_QUESTIONS_PER_DISPATCH + 1, `${opened} requests opened`);
      assert.equal(asking.supervisor.pendingRequests().length, 0, 'none outlives the run');
    } finally {
      await asking.supervisor.destroy();
    }
  });

  it('keys named __proto__ and constructor in payloads change no object on the supervisor', async () => {
    const poison = { __proto__: { polluted: 'yes' }, constructor: { prototype: { polluted: 'yes' } } };
    const forged = nextEvent(h.supervisor, 'tool.execute.start', (e) => e.toolName === 'forged');
    // JSON keeps "__proto__" an own key all the way to the worker, which posts it as one.
    const events = JSON.parse(
      `[["t","tool.execute.start",{"__proto__":{"polluted":"yes"},"toolName":"forged","toolCallId":"c","attempt":1}]]`,
    );
    const { outcome } = await intrude(h, {
      tool: 'attack',
      args: { on: 'host', message: [HostOp.events, 0, '$cap', events], sync: true },
    });
    assert.equal(outcome.status, 'done');
    const event = await forged;
    assert.equal(Object.getPrototypeOf(event), Object.prototype);
    const approved = await intrude(h, {
      tool: 'attack',
      args: {
        on: 'host',
        message: [HostOp.approve, SEQ, '$cap', { toolName: 'bait', toolCallId: 'poison', arguments: poison }],
        reply: SEQ,
      },
    });
    assert.equal(approved.outcome.status, 'done');
    const asked = h.approvals.find((a) => a.toolCallId === 'poison');
    assert.ok(asked, 'a well-formed approval of a named operation is served');
    assert.equal(Object.getPrototypeOf(asked.arguments), Object.prototype);
    const task = await intrude(h, {
      tool: 'attack',
      args: {
        on: 'host',
        message: [
          HostOp.task,
          SEQ,
          '$cap',
          { subagent: '__proto__', instructions: '', toolCallId: 't', metadata: poison },
        ],
        reply: SEQ,
      },
    });
    assert.equal(task.outcome.status, 'done');
    assert.match(task.outcome.status === 'done' ? task.outcome.result : '', /ERR_UNKNOWN_AGENT|is not a subagent/);
    for (const proto of [Object.prototype, Array.prototype, Function.prototype]) {
      assert.equal(Object.hasOwn(proto, 'polluted'), false);
    }
    assert.equal(({} as { polluted?: unknown }).polluted, undefined);
  });

  it('telemetry is re-emitted with the ids of the run its capability names, never the ids it claims', async () => {
    const forged = nextEvent(h.supervisor, 'tool.execute.start', (e) => e.toolName === 'claims');
    const claim = {
      agentId: 'victim',
      runId: 'run_victim',
      path: ['victim'],
      toolName: 'claims',
      toolCallId: 'c',
      attempt: 1,
      at: 5,
    };
    const { outcome } = await intrude(h, {
      tool: 'attack',
      args: { on: 'host', message: [HostOp.events, 0, '$cap', [['t', 'tool.execute.start', claim]]], sync: true },
    });
    const event = (await forged) as unknown as Record<string, unknown>;
    assert.equal(event.agentId, outcome.agentId);
    assert.equal(event.runId, outcome.runId);
    assert.deepEqual(event.path, [outcome.agentId]);
  });

  it('survives a 16 MiB payload and a 2,000-deep one (both valid telemetry) and goes on serving', async () => {
    const big = nextEvent(h.supervisor, 'agent.turn', (e) => typeof (e as { blob?: unknown }).blob === 'string');
    const { outcome } = await intrude(h, {
      tool: 'attack',
      args: {
        on: 'host',
        message: [HostOp.events, 0, '$cap', [['t', 'agent.turn', { turn: 1, blob: '$blob' }]]],
        blob: 16 * 1024 * 1024,
        sync: true,
      },
    });
    assert.equal(outcome.status, 'done');
    assert.equal(((await big) as { blob?: string }).blob?.length, 16 * 1024 * 1024);
    const nested = nextEvent(h.supervisor, 'agent.turn', (e) => Array.isArray((e as { deep?: unknown }).deep));
    const second = await intrude(h, {
      tool: 'attack',
      args: {
        on: 'host',
        message: [HostOp.events, 0, '$cap', [['t', 'agent.turn', { turn: 1, deep: '$deep' }]]],
        deep: 2_000,
        sync: true,
      },
    });
    assert.equal(second.outcome.status, 'done');
    await nested;
    const ok = await h.supervisor.spawn(echo, { input: 'still here', scope });
    assert.equal(ok.status === 'done' && ok.result, 'echo: still here');
  });
});

describe('parentPort and piscina task port: nothing but the protocol', () => {
  let h: Hostile;
  before(async () => {
    h = await hostileSupervisor({ pool: { threads: 2 } });
  });
  after(async () => {
    await h.supervisor.destroy();
  });

  for (const [what, message, reason] of [
    ['null', null, /not an object/],
    ['a number', 42, /not an object/],
    ['a string', 'process.exit()', /not an object/],
    ['an unknown object', { type: 'eval', code: 'process.exit()' }, /unknown parentPort message/],
    ['an array', [HostOp.approve, SEQ, '$cap', {}], /unknown parentPort message/],
  ] as const) {
    it(`refuses ${what} on parentPort`, async () => {
      await refused(h, { tool: 'attack', args: { on: 'parent', message, hold: true } }, reason);
    });
  }

  it('takes a repeated ready signal for the notice it is: no effect, no refusal', async () => {
    const from = h.refused.length;
    const { outcome } = await intrude(h, { tool: 'attack', args: { on: 'parent', message: { [WORKER_READY]: true } } });
    assert.equal(outcome.status, 'done');
    const ok = await h.supervisor.spawn(echo, { input: 'ready twice', scope });
    assert.equal(ok.status === 'done' && ok.result, 'echo: ready twice');
    assert.deepEqual(h.refused.slice(from), []);
  });

  for (const port of ['fake', 'missing'] as const) {
    it(`refuses a host channel that is not a MessagePort (${port})`, async () => {
      // A fresh thread, which has not handed over its real channel yet.
      const fresh = await hostileSupervisor({ pool: { threads: 1 } });
      try {
        await refused(fresh, { tool: 'openChannel', args: { port }, bait: false }, /not a MessagePort/);
      } finally {
        await fresh.supervisor.destroy();
      }
    });
  }

  it('refuses a second host channel', async () => {
    await refused(h, { tool: 'openChannel', args: { port: 'real' } }, /a second host channel/);
  });

  for (const [what, message, reason] of [
    ['null', null, /task-port message that is not an object/],
    ['a number', 7, /task-port message that is not an object/],
    [
      'a response to a task the thread never ran',
      { taskId: 987_654, result: null, error: null },
      /for no task of this thread/,
    ],
    ['a response without a task id', { result: ['done'], error: null }, /for no task of this thread/],
  ] as const) {
    it(`refuses ${what} on piscina's task port (it would crash the supervisor unguarded)`, async () => {
      await refused(h, { tool: 'attack', args: { on: 'piscina', message } }, reason);
    });
  }

  it(`a HOST_OPEN marker alone is refused (${HOST_OPEN})`, async () => {
    await refused(
      h,
      { tool: 'attack', args: { on: 'parent', message: { [HOST_OPEN]: 1 }, hold: true } },
      /unknown parentPort message/,
    );
  });

  // Deeper than this thread's stack can read back (a worker's, 4 MB, is four times
  // the main thread's: 10,000 levels serialize there, with room, and cannot be
  // deserialized here, with room): the message never arrives as one
  // ('messageerror'), and must still be refused, not lost.
  it('refuses a message this thread cannot read back, on the host channel', async () => {
    await refused(
      h,
      onHost([HostOp.events, 0, '$cap', [['t', 'agent.turn', { deep: '$deep' }]]], { deep: 10_000 }),
      /cannot be read/,
    );
  });

  it('refuses a message this thread cannot read back, on parentPort', async () => {
    await refused(
      h,
      { tool: 'attack', args: { on: 'parent', message: '$deep', deep: 10_000, hold: true } },
      /cannot be read/,
    );
  });

  it('refuses a result this thread cannot read back: the run ends crashed instead of hanging', async () => {
    await refused(h, { tool: 'forgeResult', args: { deep: 10_000 }, bait: false }, /cannot be read/);
  });

  it('a message it cannot read, queued behind a result on the task port, crashes nothing', async () => {
    // piscina drains a thread's task port with receiveMessageOnPort after each result, which
    // throws for a message that cannot be deserialized — inside the handler of that result.
    const faults = processFaults.uncaught.length;
    const unreadable = nextEvent(h.supervisor, 'host.refused', (r) => /cannot be read/.test(r.reason));
    const fault = nextFault().then((f) => ({ fault: f }));
    // (busy: the worker has piscina count its result while this thread reads a large event,
    // so piscina drains the port — and meets the unreadable message — when it handles the result.)
    const { outcome } = await intrude(h, { tool: 'forgeResult', args: { deep: 10_000, after: true, busy: true } });
    assert.equal(outcome.status, 'done', 'the real result came first');
    const refusal = await alive(Promise.race([unreadable, fault]));
    assert.equal(processFaults.uncaught.length, faults, 'nothing thrown on the supervisor thread');
    assert.ok('recycled' in refusal && refusal.recycled);
    const ok = await h.supervisor.spawn(echo, { input: 'after the unreadable', scope });
    assert.equal(ok.status === 'done' && ok.result, 'echo: after the unreadable');
  });

  it('after all of it the supervisor serves normal runs, with nothing leaked and nothing uncaught', async () => {
    const replies = await Promise.all(
      Array.from({ length: 8 }, (_, i) => h.supervisor.spawn(echo, { input: `run ${i}`, scope })),
    );
    assert.deepEqual(
      replies.map((r) => r.status === 'done' && r.result),
      Array.from({ length: 8 }, (_, i) => `echo: run ${i}`),
    );
    const stats = h.supervisor.stats();
    assert.equal(stats.runs, 0);
    assert.equal(stats.pool.running, 0);
    assert.equal(stats.pool.tableSize, 0);
    assert.equal(stats.pendingRequests, 0);
    assert.deepEqual(processFaults.uncaught, []);
    assert.deepEqual(processFaults.unhandled, []);
  });
});
