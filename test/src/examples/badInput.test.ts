// Every bad input to the public API gets a typed error (a TroupeError with a code, or zod's own
// error from a user's schema), never a TypeError from inside the library: each entry point is
// called with values of every kind — including an object without a prototype, whose String()
// throws, a bigint JSON cannot write, a proxy, a thenable — against real workers.
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ContextUpdate, defineAgent, defineScope, defineTool, isTroupeError, ToolResult } from '@troupe/core';
import { openaiModel } from '@troupe/openai';
import { sqlitePersistence } from '@troupe/sqlite';
import { type AgentHandle, createSupervisor, MemoryPersistence, type Supervisor } from '@troupe/supervisor';
import { z } from 'zod';
import { trivial } from '../fixtures/agents/basic.js';

const WEIRD: readonly unknown[] = [
  undefined,
  null,
  0,
  -1,
  Number.NaN,
  Number.POSITIVE_INFINITY,
  '',
  'x',
  true,
  [],
  {},
  () => 1,
  Symbol('s'),
  10n,
  new Date(0),
  new Map(),
  Object.create(null),
  // biome-ignore lint/suspicious/noThenProperty: a thenable is one of the bad inputs
  { then: () => {} },
  new Proxy({}, {}),
  '\u0000',
  'a'.repeat(10_000),
];

const label = (v: unknown): string => {
  if (typeof v === 'symbol' || typeof v === 'bigint' || typeof v === 'function') return typeof v;
  if (typeof v === 'object' && v !== null && Object.getPrototypeOf(v) === null) return 'a null-prototype object';
  return (JSON.stringify(v) ?? String(v)).slice(0, 24);
};

/** Calls `fn` with every weird value; returns what threw something other than a typed error. */
async function untyped(fn: (value: never) => unknown): Promise<string[]> {
  const bad: string[] = [];
  for (const value of WEIRD) {
    try {
      await fn(value as never);
    } catch (error) {
      if (isTroupeError(error) || (error as { name?: unknown })?.name === 'ZodError') continue;
      bad.push(`${label(value)}: ${(error as Error)?.constructor?.name} ${String((error as Error)?.message)}`);
    }
  }
  return bad;
}

const model = { generate: async () => ({ message: { role: 'assistant' as const, content: 'x' } }) };
const noArgs = z.object({});

describe('bad input to the public API: typed errors only', () => {
  let supervisor: Supervisor;
  let handle: AgentHandle;
  // A file name that is valid makes a store: under a directory of the test's own, closed after.
  const dir = mkdtempSync(join(tmpdir(), 'troupe-bad-input-'));
  const cwdBefore = readdirSync(process.cwd()).sort();
  const inDir = (w: unknown): unknown => (typeof w === 'string' && /^[a-z]+$/.test(w) ? join(dir, w) : w);
  after(() => rmSync(dir, { recursive: true, force: true }));
  before(async () => {
    supervisor = createSupervisor({ pool: { threads: 1 }, persistence: null });
    await supervisor.pool.ready();
    handle = await supervisor.startAgent(trivial, { scope: {} });
  });
  after(() => supervisor.close());

  const cases: [string, (w: never) => unknown][] = [
    ['defineTool', (w) => defineTool(w)],
    ['defineTool name', (w) => defineTool({ name: w, description: 'd', parameters: noArgs, execute: () => 1 })],
    [
      'defineTool retries',
      (w) => defineTool({ name: 't', description: 'd', parameters: noArgs, execute: () => 1, retries: w }),
    ],
    [
      'defineTool timeoutMs',
      (w) => defineTool({ name: 't', description: 'd', parameters: noArgs, execute: () => 1, timeoutMs: w }),
    ],
    ['defineTool parameters', (w) => defineTool({ name: 't', description: 'd', parameters: w, execute: () => 1 })],
    ['defineAgent', (w) => defineAgent(w)],
    ['defineAgent tools', (w) => defineAgent({ name: 'a', instructions: 'i', model, tools: w })],
    ['defineAgent subagents', (w) => defineAgent({ name: 'a', instructions: 'i', model, subagents: w })],
    ['defineAgent maxTurns', (w) => defineAgent({ name: 'a', instructions: 'i', model, maxTurns: w })],
    ['defineScope', (w) => defineScope(w)],
    ['ContextUpdate.set key', (w) => ContextUpdate.empty().set(w, 1)],
    ['ContextUpdate.set value', (w) => ContextUpdate.empty().set('k', w)],
    ['ContextUpdate.merge', (w) => ContextUpdate.empty().merge('k', w)],
    ['ContextUpdate.logEvent', (w) => ContextUpdate.empty().logEvent(w, w)],
    ['ContextUpdate.from', (w) => ContextUpdate.from(w)],
    ['ToolResult.pending', (w) => ToolResult.pending(w)],
    ['createSupervisor', (w) => createSupervisor(w).destroy()],
    ['createSupervisor pool', (w) => createSupervisor({ pool: w }).destroy()],
    ['createSupervisor pool.threads', (w) => createSupervisor({ pool: { threads: w } }).destroy()],
    ['createSupervisor approval', (w) => createSupervisor({ approval: w }).destroy()],
    ['createSupervisor persistence', (w) => createSupervisor({ persistence: w }).destroy()],
    ['createSupervisor maxIdleAgents', (w) => createSupervisor({ maxIdleAgents: w }).destroy()],
    ['MemoryPersistence', (w) => new MemoryPersistence(w)],
    ['sqlitePersistence', (w) => sqlitePersistence(w)],
    ['sqlitePersistence file', (w) => sqlitePersistence({ file: inDir(w) as never }).close()],
    ['openaiModel', (w) => openaiModel(w)],
    ['openaiModel baseURL', (w) => openaiModel({ model: 'm', baseURL: w })],
    ['startAgent agent', (w) => supervisor.startAgent(w, { scope: {} })],
    ['startAgent options', (w) => supervisor.startAgent(trivial, w)],
    [
      'startAgent agentId',
      (w) => supervisor.startAgent(trivial, { scope: {}, agentId: w }).then((a) => supervisor.stopAgent(a.id)),
    ],
    [
      'startAgent metadata',
      (w) => supervisor.startAgent(trivial, { scope: {}, metadata: w }).then((a) => supervisor.stopAgent(a.id)),
    ],
    [
      'startAgent toolContext',
      (w) => supervisor.startAgent(trivial, { scope: {}, toolContext: w }).then((a) => supervisor.stopAgent(a.id)),
    ],
    ['send', (w) => handle.send(w)],
    ['send options', (w) => handle.send('hi', w)],
    ['answer id', (w) => supervisor.answer(w, { ok: true })],
    ['answer answer', (w) => supervisor.answer('req_none', w)],
    ['answer options', (w) => supervisor.answer('req_none', { ok: true }, w)],
    ['cancel', (w) => supervisor.cancel(w)],
    ['cancel reason', (w) => supervisor.cancel(handle.id, w)],
    ['spawn agent', (w) => supervisor.spawn(w, { input: 'x', scope: {} })],
    ['spawn options', (w) => supervisor.spawn(trivial, w)],
    ['spawn input', (w) => supervisor.spawn(trivial, { input: w, scope: {} })],
    ['spawn timeoutMs', (w) => supervisor.spawn(trivial, { input: 'x', scope: {}, timeoutMs: w })],
    ['listRequests', (w) => supervisor.listRequests(w)],
    ['stopAgent', (w) => supervisor.stopAgent(w)],
    ['close options', (w) => createSupervisor({ pool: { threads: 1 } }).close(w)],
  ];
  for (const [name, fn] of cases) {
    it(name, async () => {
      assert.deepEqual(await untyped(fn), []);
    });
  }

  it('made no file outside its own directory', () => {
    assert.deepEqual(readdirSync(process.cwd()).sort(), cwdBefore);
  });
});
