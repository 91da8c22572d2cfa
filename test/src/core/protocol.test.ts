import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type AgentId, type LoopEnd, NO_USAGE, type SessionEvent, TroupeError } from '@troupe/core';
import {
  decodeSubagentResult,
  decodeSubagentTask,
  encodeSubagentFailure,
  encodeSubagentResult,
  encodeSubagentTask,
  endOfLoop,
  HostTaskRequest,
  initialLoopState,
  type LoopOutcome,
  PROTOCOL_VERSION,
  parseHostTaskRequest,
  ResultSlot,
  type SubagentTask,
  TaskFlag,
} from '@troupe/core/internal';

const base: SubagentTask = {
  module: 'file:///agents.js',
  agent: 'echo',
  agentId: 'agent_1',
  slot: 3,
  generation: 1,
  host: 0,
  scope: { userId: 'u1' },
  input: 'hi',
  capability: 'AbCdEfGhIjKlMnOpQrStUv-_',
};

describe('the supervisor → worker task on the wire', () => {
  it('decodes what it encodes, with and without the rare extras, the scope version in the tuple', () => {
    for (const task of [
      base,
      { ...base, scopeVersion: 7 },
      { ...base, scopeVersion: 2, parentAgentId: 'agent_0', metadata: { title: 'Chat' }, timeoutMs: 5 },
      { ...base, buffer: new SharedArrayBuffer(64) },
    ] satisfies SubagentTask[]) {
      const wire = encodeSubagentTask(task);
      assert.equal(wire.length, 13);
      assert.equal(wire[8], task.scopeVersion ?? 0);
      const decoded = decodeSubagentTask(structuredClone(wire));
      assert.equal(decoded.error, undefined);
      for (const [key, value] of Object.entries(task)) {
        assert.deepEqual((decoded.task as unknown as Record<string, unknown>)[key], value, key);
      }
    }
    // A lean task without extras sends none (they cost a zod parse in the worker).
    assert.equal(encodeSubagentTask({ ...base, scopeVersion: 7 })[10], null);
  });

  it('refuses a malformed task with what is wrong', () => {
    const wire = encodeSubagentTask(base);
    const bad = (at: number, value: unknown) => decodeSubagentTask(wire.map((v, i) => (i === at ? value : v)));
    assert.match(decodeSubagentTask(wire.slice(0, 12)).error ?? '', /13-element array/);
    assert.match(decodeSubagentTask('task').error ?? '', /13-element array/);
    assert.match(bad(11, 'short').error ?? '', /capability/);
    assert.match(bad(11, undefined).error ?? '', /capability/);
    assert.match(bad(12, new ArrayBuffer(8)).error ?? '', /buffer must be a SharedArrayBuffer/);
    assert.match(bad(0, PROTOCOL_VERSION - 1).error ?? '', new RegExp(`this worker speaks ${PROTOCOL_VERSION}`));
    assert.match(bad(8, -1).error ?? '', /scopeVersion must be a non-negative integer/);
    assert.match(bad(8, 1.5).error ?? '', /scopeVersion/);
    assert.match(bad(8, '1').error ?? '', /scopeVersion/);
    assert.match(bad(6, TaskFlag.serializedScope).error ?? '', /serialized scope must be a Uint8Array/);
    assert.match(bad(10, { timeoutMs: -1 }).error ?? '', /extras\.timeoutMs/);
    assert.match(bad(10, []).error ?? '', /extras must be an object or null/);
    assert.match(bad(10, { parentAgentId: '' }).error ?? '', /extras\.parentAgentId/);
    assert.match(bad(10, { metadata: [1] }).error ?? '', /extras\.metadata must be an object/);
    assert.match(bad(10, { toolContext: 'flags' }).error ?? '', /extras\.toolContext must be an object/);
    for (const notPlain of [new Map([['a', 1]]), new Date(0), new Uint8Array(2)]) {
      assert.match(bad(10, { metadata: notPlain }).error ?? '', /extras\.metadata must be an object/);
    }
    assert.match(bad(10, { resume: { state: {}, answer: {}, approvedCalls: [] } }).error ?? '', /extras\.resume\./);
    // Keys it does not know are ignored, as a zod object would.
    assert.equal(bad(10, { parentAgentId: 'agent_0', later: true }).task?.parentAgentId, 'agent_0');
  });

  it("a worker's task request: checked as its schema checks it, a malformed one refused", () => {
    const ok = { subagent: 'leaf', instructions: 'go', toolCallId: 'call_1', metadata: { title: 'Chat' } };
    for (const request of [ok, { ...ok, instructions: '' }]) {
      assert.deepEqual(parseHostTaskRequest(structuredClone(request)), HostTaskRequest.parse(request));
    }
    for (const bad of [
      null,
      'task',
      { ...ok, subagent: '' },
      { ...ok, instructions: 3 },
      { ...ok, toolCallId: undefined },
      { ...ok, metadata: [] },
      { ...ok, metadata: null },
      { ...ok, metadata: new Map([['a', 1]]) },
      { ...ok, metadata: new Uint8Array(2) },
    ]) {
      assert.equal(parseHostTaskRequest(bad), undefined, JSON.stringify(bad));
      assert.equal(HostTaskRequest.safeParse(bad).success, false, `the schema agrees: ${JSON.stringify(bad)}`);
    }
  });
});

// An end with its error as the wire carries one (decoded on the supervisor, a new Error).
function comparable(end: LoopEnd): unknown {
  if (end.status !== 'failed') return end;
  const error = end.error as Error & { code?: string };
  return { ...end, error: { name: error.name, message: error.message, code: error.code } };
}

describe('the worker → supervisor result on the wire', () => {
  const event: SessionEvent = { type: 'note', data: { n: 1 }, agentId: 'agent_1' as AgentId, at: 5 };
  const fresh = initialLoopState('agent_1' as AgentId, 'be brief', {});
  const spent = {
    ...fresh,
    turns: 3,
    usage: { inputTokens: 12, outputTokens: 4 },
    events: [event],
    updates: [{ op: 'set', key: 'title', value: 'Chat' }],
  } as typeof fresh;
  const outcomes: LoopOutcome[] = [];
  for (const state of [fresh, spent]) {
    outcomes.push(
      { status: 'done', text: 'ok', state },
      { status: 'done', text: '{"n":1}', output: { n: 1 }, state },
      { status: 'failed', error: new TroupeError('the model refused', { code: 'ERR_MODEL' }), state },
      { status: 'incomplete', state },
      { status: 'cancelled', reason: 'deadline', state },
      { status: 'suspended', request: { id: 'req_1', kind: 'confirm', prompt: 'sure?' }, state },
    );
  }

  it("reads back as the main thread's end of the same loop: one shape whichever thread ran it", () => {
    for (const outcome of outcomes) {
      const wire = encodeSubagentResult(outcome, 2);
      const read = decodeSubagentResult(structuredClone(wire));
      const label = `${outcome.status} after ${outcome.state.turns} turns`;
      assert.equal(read.error, undefined, label);
      assert.deepEqual(comparable(read.result?.end as LoopEnd), comparable(endOfLoop(outcome)), label);
      assert.deepEqual(read.result?.usage, outcome.state.usage, label);
      assert.equal(read.result?.sent, 2, label);
      assert.equal(read.result?.tail, undefined, label);
      // What a run did not spend or record is left out of the tuple (null), not sent empty.
      if (outcome.state === fresh) assert.deepEqual([wire[3], wire[4]], [null, null], label);
    }
  });

  it('carries a tail after its own fields, and a held result reads its cancel as forced, without the tail', () => {
    const cancelled = outcomes.find((o) => o.status === 'cancelled' && o.state === spent) as LoopOutcome;
    const wire = encodeSubagentResult(cancelled, 1);
    wire[ResultSlot.sent] = 4;
    const tail = [['t', 'model.call', {}]];
    wire.push(tail);
    const read = decodeSubagentResult(structuredClone(wire));
    assert.deepEqual(read.result, {
      end: { status: 'cancelled', reason: 'deadline', forced: false },
      usage: spent.usage,
      sent: 4,
      tail,
    });
    const held = decodeSubagentResult(structuredClone(wire), true);
    assert.deepEqual(held.result, {
      end: { status: 'cancelled', reason: 'deadline', forced: true },
      usage: spent.usage,
      sent: 4,
      tail: undefined,
    });
  });

  it('a run that failed with no loop to report: a failure of no turns, nothing spent', () => {
    const read = decodeSubagentResult(
      structuredClone(encodeSubagentFailure(new TroupeError('malformed subagent task', { code: 'ERR_PROTOCOL' }), 0)),
    );
    assert.equal(read.result?.end.status, 'failed');
    assert.deepEqual(comparable(read.result?.end as LoopEnd), {
      status: 'failed',
      error: { name: 'TroupeError', message: 'malformed subagent task', code: 'ERR_PROTOCOL' },
      events: [],
      turns: 0,
    });
    assert.equal(read.result?.usage, NO_USAGE);
  });
});
