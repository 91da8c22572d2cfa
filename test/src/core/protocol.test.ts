import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  decodeSubagentTask,
  encodeSubagentTask,
  HostTaskRequest,
  PROTOCOL_VERSION,
  parseHostTaskRequest,
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
