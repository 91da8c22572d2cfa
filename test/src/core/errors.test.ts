import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  BackpressureError,
  CancelledError,
  ClosedError,
  InvalidArgumentError,
  isTroupeError,
  ToolTimeoutError,
  TroupeError,
  WorkerCrashedError,
} from '@troupe/core';
import { decodeError, encodeError } from '@troupe/core/internal';

describe('errors survive the thread boundary', () => {
  const cases: [string, Error][] = [
    ['TroupeError', new TroupeError('boom', { code: 'ERR_TOOL_FAILED' })],
    ['InvalidArgumentError', new InvalidArgumentError('bad scope', { code: 'ERR_SCOPE_OVER_BUDGET' })],
    ['CancelledError', new CancelledError('deadline')],
    ['ToolTimeoutError', new ToolTimeoutError('spin', 50, true)],
    ['ClosedError', new ClosedError('closed')],
    ['WorkerCrashedError', new WorkerCrashedError('died', 7)],
    ['BackpressureError', new BackpressureError('full', 10)],
  ];
  for (const [name, original] of cases) {
    it(`rebuilds ${name} as the same class with code, fields, message and stack`, () => {
      const shape = structuredClone(encodeError(original));
      const rebuilt = decodeError(shape);
      assert.equal(rebuilt.constructor, original.constructor);
      assert.equal(rebuilt.message, original.message);
      assert.equal(rebuilt.stack, original.stack);
      assert.ok(isTroupeError(rebuilt));
      assert.equal((rebuilt as TroupeError).code, (original as TroupeError).code);
      assert.deepEqual((rebuilt as TroupeError).toData(), (original as TroupeError).toData());
    });
  }

  it('keeps a foreign error as a plain Error with its name, code and cause', () => {
    const original = Object.assign(new RangeError('out of range', { cause: new Error('inner') }), { code: 'E_RANGE' });
    const rebuilt = decodeError(structuredClone(encodeError(original)));
    assert.equal(rebuilt.name, 'RangeError');
    assert.equal((rebuilt as unknown as { code: string }).code, 'E_RANGE');
    assert.equal((rebuilt.cause as Error).message, 'inner');
    assert.equal(isTroupeError(rebuilt), false);
  });

  it('encodes thrown non-errors', () => {
    assert.deepEqual(encodeError('plain'), { name: 'Error', message: 'plain' });
    assert.deepEqual(encodeError({ a: 1 }), { name: 'Error', message: '{"a":1}' });
  });

  it('isTroupeError checks the code when given', () => {
    const e = new CancelledError('user');
    assert.ok(isTroupeError(e, 'ERR_CANCELLED'));
    assert.equal(isTroupeError(e, 'ERR_CLOSED'), false);
    assert.equal(isTroupeError(new Error('x')), false);
    assert.equal(isTroupeError(null), false);
  });
});
