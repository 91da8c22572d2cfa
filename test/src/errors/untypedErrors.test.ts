// Issue 31, item 11: untyped errors escaped the public API, and one bad input held the supervisor
// thread ~40 s. Each case here goes through a real supervisor and its worker threads.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { assertCloneable, defineScope, isTroupeError } from '@troupe/core';
import { createSupervisor, type Supervisor } from '@troupe/supervisor';
import { z } from 'zod';
import { echo } from '../fixtures/agents/basic.js';

function revoked(): object {
  const { proxy, revoke } = Proxy.revocable({}, {});
  revoke();
  return proxy;
}

const typed = (code: string, pattern: RegExp) => (error: unknown) => {
  assert.ok(
    isTroupeError(error),
    `expected a TroupeError, got ${(error as Error)?.constructor?.name}: ${(error as Error)?.message}`,
  );
  assert.equal(error.code, code, error.message);
  assert.match(error.message, pattern);
  return true;
};

describe('typed errors for inputs that threw untyped ones', () => {
  let supervisor: Supervisor;
  let withSchema: Supervisor;
  before(async () => {
    supervisor = createSupervisor({ pool: { threads: 1 } });
    withSchema = createSupervisor({
      pool: { threads: 1 },
      scope: defineScope(z.object({ tenantId: z.string() })),
    });
    await Promise.all([supervisor.pool.ready(), withSchema.pool.ready()]);
  });
  after(async () => {
    await Promise.all([supervisor.destroy(), withSchema.destroy()]);
  });

  it('a Map entry whose key is a null-prototype object: ERR_NOT_CLONEABLE with a path, not a TypeError', async () => {
    const map = new Map<unknown, unknown>([
      ['ok', 1],
      [Object.create(null), () => 'not data'],
    ]);
    await assert.rejects(
      supervisor.spawn(echo, { input: 'x', scope: { map } }),
      typed('ERR_NOT_CLONEABLE', /^scope\.map\.get\(<key 1>\) is a function:/),
    );
    await assert.rejects(
      supervisor.spawn(echo, { input: 'x', scope: {}, toolContext: { map } }),
      typed('ERR_NOT_CLONEABLE', /^toolContext\.map\.get\(<key 1>\) is a function:/),
    );
    assert.throws(() => assertCloneable({ map }, 'value'), typed('ERR_NOT_CLONEABLE', /^value\.map\.get\(<key 1>\)/));
  });

  it('a revoked Proxy as the scope of a supervisor with a schema: a typed error, not a TypeError from zod', async () => {
    await assert.rejects(
      withSchema.spawn(echo, { input: 'x', scope: revoked() as never }),
      typed('ERR_INVALID_ARGUMENT', /^scope: the schema threw while reading it \(.*revoked.*\): pass plain data/),
    );
    await assert.rejects(
      withSchema.startAgent(echo, { scope: revoked() as never }),
      typed('ERR_INVALID_ARGUMENT', /the schema threw while reading it/),
    );
    await assert.rejects(
      supervisor.spawn(echo, { input: 'x', scope: revoked() }),
      typed('ERR_NOT_CLONEABLE', /^scope is a Proxy/),
    );
  });

  it('a revoked Proxy as toolContext or metadata: ERR_NOT_CLONEABLE, not a TypeError from Array.isArray', async () => {
    for (const call of [
      () => supervisor.spawn(echo, { input: 'x', scope: {}, toolContext: revoked() as never }),
      () => supervisor.startAgent(echo, { scope: {}, toolContext: revoked() as never }),
    ]) {
      await assert.rejects(call(), typed('ERR_NOT_CLONEABLE', /^toolContext is a Proxy/));
    }
    for (const call of [
      () => supervisor.spawn(echo, { input: 'x', scope: {}, metadata: revoked() as never }),
      () => supervisor.startAgent(echo, { scope: {}, metadata: revoked() as never }),
    ]) {
      await assert.rejects(call(), typed('ERR_NOT_CLONEABLE', /^metadata is a Proxy/));
    }
  });

  it('a toolContext whose Map is changed to hold a function after it was sealed: ERR_NOT_CLONEABLE with its path', async () => {
    const flags = new Map<string, unknown>([['beta', true]]);
    const toolContext = { flags };
    assert.equal((await supervisor.spawn(echo, { input: 'first', scope: {}, toolContext })).status, 'done');
    flags.set('beta', () => true);
    await assert.rejects(
      supervisor.spawn(echo, { input: 'second', scope: {}, toolContext }),
      typed('ERR_NOT_CLONEABLE', /^toolContext\.flags\.get\("beta"\) is a function:/),
    );
    flags.set('beta', false);
    assert.equal((await supervisor.spawn(echo, { input: 'third', scope: {}, toolContext })).status, 'done');
  });

  it('a sealed scope whose Map is changed to hold a function: ERR_NOT_CLONEABLE with its path, not a DataCloneError', async () => {
    const settings = new Map<string, unknown>([['theme', 'dark']]);
    const scope = { tenantId: 't1', settings };
    const first = await supervisor.spawn(echo, { input: 'first', scope });
    assert.equal(first.status, 'done');
    // Sealing froze the scope as far as freezing goes; a Map's entries stay changeable.
    settings.set('theme', () => 'dark');
    await assert.rejects(
      supervisor.spawn(echo, { input: 'second', scope }),
      typed('ERR_NOT_CLONEABLE', /^scope\.settings\.get\("theme"\) is a function:/),
    );
    settings.set('theme', 'light');
    const third = await supervisor.spawn(echo, { input: 'third', scope });
    assert.equal(third.status, 'done', 'the scope is taken again once it is data again');
  });

  it("an array as metadata is described by its length, not by its toString (the caller's code)", async () => {
    await assert.rejects(
      supervisor.spawn(echo, { input: 'x', scope: {}, metadata: ['a', 'b'] as never }),
      typed('ERR_INVALID_ARGUMENT', /metadata must be a plain object .* got an array of length 2$/),
    );
  });

  it('a sparse array of length 2 ** 31 + 1 as metadata is refused by its length, not joined (~40 s)', async () => {
    const sparse: unknown[] = [];
    sparse.length = 2 ** 31 + 1;
    sparse[0] = 'x';
    await assert.rejects(
      supervisor.startAgent(echo, { scope: {}, metadata: sparse as never }),
      typed('ERR_INVALID_ARGUMENT', /got an array of length 2147483649$/),
    );
    await assert.rejects(
      supervisor.spawn(echo, { input: 'x', scope: {}, metadata: sparse as never }),
      typed('ERR_INVALID_ARGUMENT', /got an array of length 2147483649$/),
    );
  });
});
