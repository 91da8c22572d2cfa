// Hostile-checker findings: bad inputs at the public API that are not refused
// at the edge with a typed error (DESIGN §1, §9: "every bad input gets a clear
// typed error"; "a spawn whose channels are not cloneable fails before
// anything is sent, with the path of the offending value").
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidArgumentError, isTroupeError, type Metadata } from '@troupe/core';
import { createSupervisor } from '@troupe/supervisor';
import { echo } from '../fixtures/agents/basic.js';

const typed = (error: unknown): boolean => error instanceof InvalidArgumentError;

describe('metadata that is not an object', () => {
  it('spawn({ metadata: [1] }) is refused at the edge with an InvalidArgumentError (not an ERR_PROTOCOL from the worker)', async () => {
    const supervisor = createSupervisor({ pool: { threads: 1 } });
    try {
      await assert.rejects(
        supervisor.spawn(echo, { input: 'x', scope: {}, metadata: [1] as unknown as Metadata }),
        typed,
      );
      await assert.rejects(
        supervisor.spawn(echo, { input: 'x', scope: {}, metadata: 'abc' as unknown as Metadata }),
        typed,
      );
    } finally {
      await supervisor.destroy();
    }
  });

  it('startAgent({ metadata: "abc" }) is refused with an InvalidArgumentError', async () => {
    const supervisor = createSupervisor({ pool: { threads: 1 } });
    try {
      await assert.rejects(supervisor.startAgent(echo, { scope: {}, metadata: 'abc' as unknown as Metadata }), typed);
      await assert.rejects(supervisor.startAgent(echo, { scope: {}, metadata: [1, 2] as unknown as Metadata }), typed);
    } finally {
      await supervisor.destroy();
    }
  });

  // The first task a thread gets carries its cancellation buffer (Dispatcher.bind sets
  // bufferSent before the task is posted). A first task the worker refuses to decode, or
  // one that cannot be posted at all, loses the buffer: every later task on the thread
  // then fails with ERR_PROTOCOL "this worker received a task before its cancellation buffer".
  for (const [label, metadata] of [
    ['a list as metadata (the worker refuses the task)', [1]],
    ['a frozen metadata holding a function (the task cannot be posted)', Object.freeze({ fn() {} })],
  ] as const) {
    it(`a first task that never starts does not poison its worker: ${label}`, async () => {
      const supervisor = createSupervisor({ pool: { threads: 1 } });
      try {
        // Refused at the edge or failed in the worker: either way nothing of it may outlive it.
        await supervisor
          .spawn(echo, { input: 'x', scope: {}, metadata: metadata as unknown as Metadata })
          .catch(() => {});
        const outcome = await supervisor.spawn(echo, { input: 'hello', scope: {} });
        assert.equal(
          outcome.status,
          'done',
          outcome.status === 'failed' ? `${(outcome.error as { code?: string }).code}: ${outcome.error.message}` : '',
        );
        const again = await supervisor.spawn(echo, { input: 'hello again', scope: {} });
        assert.equal(again.status, 'done');
      } finally {
        await supervisor.destroy();
      }
    });
  }
});

describe('metadata that JSON cannot hold', () => {
  // ContextUpdate.set refuses these (assertJson); metadata is persisted as JSON.
  for (const [label, metadata] of [
    ['a bigint', { b: 1n }],
    ['a Date', { d: new Date(0) }],
    ['NaN', { n: Number.NaN }],
  ] as const) {
    it(`startAgent({ metadata }) holding ${label} is refused at the edge with a typed error`, async () => {
      const supervisor = createSupervisor({ pool: { threads: 1 } });
      try {
        await assert.rejects(
          supervisor.startAgent(echo, { scope: {}, metadata }),
          (e: unknown) => isTroupeError(e) && (e.code === 'ERR_NOT_JSON' || e.code === 'ERR_INVALID_ARGUMENT'),
        );
      } finally {
        await supervisor.destroy();
      }
    });
  }
});

describe('channels that cannot be cloned', () => {
  it('a frozen metadata holding a function is refused before anything is sent, naming its path', async () => {
    const supervisor = createSupervisor({ pool: { threads: 1 } });
    try {
      const metadata = Object.freeze({ ok: 1, fn() {} }) as unknown as Metadata;
      await assert.rejects(
        supervisor.spawn(echo, { input: 'x', scope: {}, metadata }),
        (e: unknown) => isTroupeError(e) && e.code === 'ERR_NOT_CLONEABLE' && e.message.includes('metadata.fn'),
      );
    } finally {
      await supervisor.destroy();
    }
  });
});

describe('a signal that is not an AbortSignal', () => {
  it('spawn({ signal: {} }) and send(message, { signal: {} }) are refused with an InvalidArgumentError, not a TypeError', async () => {
    const supervisor = createSupervisor({ pool: { threads: 1 } });
    try {
      const signal = {} as AbortSignal;
      await assert.rejects(supervisor.spawn(echo, { input: 'x', scope: {}, signal }), typed);
      const agent = await supervisor.startAgent(echo, { scope: {} });
      await assert.rejects(agent.send('x', { signal }), typed);
    } finally {
      await supervisor.destroy();
    }
  });
});
