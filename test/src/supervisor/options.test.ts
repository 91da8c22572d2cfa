// createSupervisor's options: checked once, at construction, through the public
// createSupervisor only; one test per rule. A refused option throws an
// InvalidArgumentError (ERR_INVALID_ARGUMENT) whose one-line message names the
// option, and starts no worker thread.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { Worker } from 'node:worker_threads';
import { type Clock, defineAgent, defineScope, InvalidArgumentError, isTroupeError } from '@troupe/core';
import { ManualClock, ScriptedModel } from '@troupe/core/testing';
import { sqlitePersistence } from '@troupe/sqlite';
import { createSupervisor, MemoryPersistence, type SupervisorOptions } from '@troupe/supervisor';
import { z } from 'zod';
import { echo } from '../fixtures/agents/basic.js';

/** `createSupervisor(options)` throws a typed error whose message matches every pattern. */
function refused(options: unknown, ...patterns: RegExp[]): void {
  let error: unknown;
  try {
    // Accepted (a failure): its threads are let go at once.
    void createSupervisor(options as SupervisorOptions).destroy();
  } catch (e) {
    error = e;
  }
  assert.ok(error !== undefined, `accepted ${String(JSON.stringify(options))}`);
  assert.ok(error instanceof InvalidArgumentError, `not an InvalidArgumentError: ${String(error)}`);
  assert.ok(isTroupeError(error, 'ERR_INVALID_ARGUMENT'));
  assert.equal(error.code, 'ERR_INVALID_ARGUMENT');
  for (const pattern of patterns) assert.match(error.message, pattern);
  assert.ok(!error.message.includes('\n'), `a message of one line: ${error.message}`);
}

/** `createSupervisor(options)` builds a supervisor (on one thread, saving nothing unless told), destroyed at once. */
async function accepted(options: SupervisorOptions): Promise<void> {
  const supervisor = createSupervisor({ persistence: null, ...options, pool: { threads: 1, ...options.pool } });
  await supervisor.destroy();
}

const model = ScriptedModel.answering('x');
const named = (name: string) => defineAgent({ name, instructions: '', model });
const clock: Clock = { now: () => 0, setTimeout: () => 0 as never, clearTimeout: () => {} };

describe('createSupervisor options', () => {
  describe('the options object', () => {
    it('is an object: a number or null is refused', () => {
      refused(5, /options/, /pass an object/);
      refused(null, /options/, /pass an object/);
    });

    it('is optional: none and {} are the defaults', async () => {
      await createSupervisor({ pool: { threads: 1 } }).destroy();
      await accepted({});
    });

    it('an unknown option is refused by name, with the options listed', () => {
      refused({ subagentTimeout: 1000 }, /unknown option "subagentTimeout"/, /subagentTimeoutMs/);
      refused({ scopeBudget: 1024 }, /unknown option "scopeBudget"/, /scopeBudgetBytes/);
      refused({ pools: { threads: 1 } }, /unknown option "pools"/, /\bpool\b/);
    });

    it('a refused option starts no worker thread', async () => {
      const started: Worker[] = [];
      const onWorker = (worker: Worker) => started.push(worker);
      process.on('worker', onWorker);
      try {
        refused({ pool: { threads: 1 }, mailboxSize: 0 }, /mailboxSize/);
        refused({ pool: { threads: 0 } }, /pool\.threads/);
        // process 'worker' is emitted on the next tick after a Worker is constructed.
        await new Promise((resolve) => setImmediate(resolve));
      } finally {
        process.off('worker', onWorker);
      }
      assert.deepEqual(started, []);
    });
  });

  describe('agents', () => {
    it('is an array: anything else is refused', () => {
      refused({ agents: 5 }, /options\.agents must be an array/, /defineAgent/, /got 5/);
      refused({ agents: echo }, /options\.agents must be an array/);
    });

    it('holds agents made with defineAgent: a plain object is refused', () => {
      refused({ agents: [{ name: 'x', instructions: '' }] }, /options\.agents/, /defineAgent/);
      refused({ agents: [echo, null] }, /options\.agents/, /defineAgent/);
    });

    it('two agents of one name are refused, naming it', () => {
      refused({ agents: [named('support'), named('billing'), named('support')] }, /agents/, /"support"/);
    });

    it('the same agent twice is refused too (one name, one agent)', () => {
      const support = named('support');
      refused({ agents: [support, support] }, /agents/, /"support"/);
    });

    it('distinct names are accepted', async () => {
      await accepted({ agents: [named('support'), named('billing')] });
    });
  });

  describe('approval', () => {
    it('is a function: a string or an object is refused', () => {
      refused({ approval: 'yes' }, /options\.approval must be a function/);
      refused({ approval: { decision: 'approve' } }, /options\.approval must be a function/);
    });
  });

  describe('mailboxSize', () => {
    it('is a positive integer: 0, -1, 1.5, NaN and "256" are refused', () => {
      for (const bad of [0, -1, 1.5, Number.NaN, '256']) {
        refused({ mailboxSize: bad }, /options\.mailboxSize must be a positive integer/);
      }
    });

    it('1 is accepted', async () => {
      await accepted({ mailboxSize: 1 });
    });
  });

  describe('scopeBudgetBytes', () => {
    it('is a positive integer: 0, -1, 1.5, Infinity and "4096" are refused, naming the value', () => {
      refused({ scopeBudgetBytes: 0 }, /options\.scopeBudgetBytes must be a positive integer/, /got 0/);
      for (const bad of [-1, 1.5, Number.POSITIVE_INFINITY, '4096']) {
        refused({ scopeBudgetBytes: bad }, /options\.scopeBudgetBytes must be a positive integer/);
      }
    });

    it('1 is accepted', async () => {
      await accepted({ scopeBudgetBytes: 1 });
    });
  });

  describe('subagentTimeoutMs', () => {
    it('is a positive number of ms: 0, -1, NaN, Infinity and "1000" are refused, naming the value', () => {
      refused({ subagentTimeoutMs: 0 }, /options\.subagentTimeoutMs must be a positive number of ms/, /got 0/);
      for (const bad of [-1, Number.NaN, Number.POSITIVE_INFINITY, '1000']) {
        refused({ subagentTimeoutMs: bad }, /options\.subagentTimeoutMs must be a positive number of ms/);
      }
    });

    it('a fraction of a ms and undefined (no deadline) are accepted', async () => {
      await accepted({ subagentTimeoutMs: 0.5 });
      await accepted({ subagentTimeoutMs: undefined } as unknown as SupervisorOptions);
    });
  });

  describe('clock', () => {
    it('has now(), setTimeout() and clearTimeout(): one missing is refused', () => {
      for (const missing of ['now', 'setTimeout', 'clearTimeout'] as const) {
        const { [missing]: _gone, ...partial } = clock;
        refused({ clock: partial }, /options\.clock must have now\(\), setTimeout\(\) and clearTimeout\(\)/);
      }
    });

    it('its members are functions: a number for now is refused', () => {
      refused({ clock: { ...clock, now: 0 } }, /options\.clock/);
    });

    it('is an object: a function or a number is refused', () => {
      refused({ clock: () => 0 }, /options\.clock/);
      refused({ clock: 5 }, /options\.clock/);
    });

    it('a ManualClock and a plain object of the three functions are accepted', async () => {
      await accepted({ clock: new ManualClock() });
      await accepted({ clock });
    });
  });

  describe('pool', () => {
    it('threads is an integer from 1 to 256', () => {
      for (const bad of [0, 257, 1.5, '2']) refused({ pool: { threads: bad } }, /pool\.threads/);
    });

    it('maxQueue is a non-negative integer', () => {
      for (const bad of [-1, 1.5]) refused({ pool: { maxQueue: bad } }, /pool\.maxQueue/);
    });

    it('graceMs is a finite non-negative number', () => {
      for (const bad of [-1, Number.NaN, Number.POSITIVE_INFINITY])
        refused({ pool: { graceMs: bad } }, /pool\.graceMs/);
    });

    it('watchdogIntervalMs is a finite number of at least 1', () => {
      for (const bad of [0, Number.NaN]) refused({ pool: { watchdogIntervalMs: bad } }, /pool\.watchdogIntervalMs/);
    });

    it('tableCapacity is a positive integer', () => {
      for (const bad of [0, 1.5]) refused({ pool: { tableCapacity: bad } }, /pool\.tableCapacity/);
    });

    it('floodLimit is a positive integer', () => {
      for (const bad of [0, -5, 2.5]) refused({ pool: { floodLimit: bad } }, /pool\.floodLimit/);
    });

    it('resourceLimits holds positive sizes in MB, and only the four V8 limits', () => {
      refused(
        { pool: { resourceLimits: { maxOldGenerationSizeMb: 0 } } },
        /pool\.resourceLimits\.maxOldGenerationSizeMb/,
      );
      refused({ pool: { resourceLimits: { stackSizeMb: -1 } } }, /pool\.resourceLimits\.stackSizeMb/);
      refused({ pool: { resourceLimits: { maxHeapMb: 64 } } }, /pool\.resourceLimits/, /maxHeapMb/);
    });

    it('an unknown pool option is refused by name', () => {
      refused({ pool: { thread: 1 } }, /pool/, /"thread"/);
    });

    it('is an object: a number is refused', () => {
      refused({ pool: 2 }, /pool/);
    });
  });

  describe('persistence', () => {
    it('is an object: a number or a string is refused, naming what to pass', () => {
      refused({ persistence: 5 }, /options\.persistence must be a PersistenceAdapter/, /null/);
      refused({ persistence: 'store.sqlite' }, /options\.persistence must be a PersistenceAdapter/);
    });

    it('implements the whole adapter contract: the missing methods are named', () => {
      refused({ persistence: {} }, /options\.persistence does not implement persistState, loadState/);
      const { release: _release, ...partial } = Object.fromEntries(
        Object.entries(Object.getOwnPropertyDescriptors(MemoryPersistence.prototype)).map(([k]) => [k, () => {}]),
      );
      refused({ persistence: partial }, /options\.persistence does not implement release:/);
    });

    it('the hint in the error names an option sqlitePersistence accepts', async () => {
      let message = '';
      try {
        createSupervisor({ pool: { threads: 1 }, persistence: 5 as never });
      } catch (e) {
        message = (e as Error).message;
      }
      const hinted = /sqlitePersistence\(\{ (\w+) \}\)/.exec(message)?.[1];
      assert.ok(hinted !== undefined, `no sqlitePersistence({ option }) hint in: ${message}`);
      const dir = mkdtempSync(join(tmpdir(), 'troupe-options-'));
      try {
        const store = sqlitePersistence({ [hinted]: join(dir, 'store.sqlite') } as never);
        await store.close?.();
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('null (save nothing) and a MemoryPersistence are accepted', async () => {
      await accepted({ persistence: null });
      await accepted({ persistence: new MemoryPersistence() });
    });
  });

  describe('maxIdleAgents', () => {
    it('is a non-negative integer: -1, 1.5, NaN and "10" are refused', () => {
      for (const bad of [-1, 1.5, Number.NaN, '10']) {
        refused({ maxIdleAgents: bad }, /options\.maxIdleAgents must be a non-negative integer/);
      }
    });

    it('0 (hold no idle agent) is accepted', async () => {
      await accepted({ maxIdleAgents: 0 });
    });
  });

  describe('restart', () => {
    it('is { maxRestarts, periodMs }: a number, null or an array is refused', () => {
      for (const bad of [5, null, []]) refused({ restart: bad }, /restart must be \{ maxRestarts, periodMs \}/);
    });

    it('an unknown key (a misspelt maxRestarts) is refused by name', () => {
      refused({ restart: { intensity: 2 } }, /restart: unknown option "intensity"/, /maxRestarts, periodMs/);
    });

    it('maxRestarts is a non-negative integer', () => {
      for (const bad of [-1, 1.5, Number.NaN]) {
        refused({ restart: { maxRestarts: bad } }, /restart\.maxRestarts must be a non-negative integer/);
      }
    });

    it('periodMs is a positive number of ms', () => {
      for (const bad of [0, -1, Number.NaN, Number.POSITIVE_INFINITY]) {
        refused({ restart: { periodMs: bad } }, /restart\.periodMs must be a positive number of ms/);
      }
    });

    it('one of the two alone is accepted (the other defaults)', async () => {
      await accepted({ restart: { maxRestarts: 0 } });
      await accepted({ restart: { periodMs: 1 } });
    });
  });

  describe('scope', () => {
    it('a definition made with defineScope is accepted, with its own budget', async () => {
      await accepted({ scope: defineScope(z.object({ tenantId: z.string() }), { budgetBytes: 512 }) });
    });

    it('anything else is refused (a number or {} was taken, and startAgent then threw a TypeError)', () => {
      refused({ scope: 5 }, /options\.scope/, /defineScope/);
      refused({ scope: {} }, /options\.scope/, /defineScope/);
    });
  });

  describe('null is not "not given"', () => {
    it('clock, pool, mailboxSize, maxIdleAgents and scopeBudgetBytes refuse null, as agents, approval, restart and subagentTimeoutMs do (null meant the default)', () => {
      for (const option of ['clock', 'pool', 'mailboxSize', 'maxIdleAgents', 'scopeBudgetBytes']) {
        refused({ [option]: null }, new RegExp(option));
      }
    });

    it('agents, approval, restart and subagentTimeoutMs refuse null', () => {
      refused({ agents: null }, /options\.agents/);
      refused({ approval: null }, /options\.approval/);
      refused({ restart: null }, /restart/);
      refused({ subagentTimeoutMs: null }, /options\.subagentTimeoutMs/);
    });
  });

  describe('times past what a timer can wait', () => {
    it('pool.graceMs over 2^31 - 1 ms is refused (a longer timer fires at once, so close() would not wait at all)', () => {
      refused({ pool: { graceMs: 2 ** 31 } }, /pool\.graceMs/);
    });
  });
});
