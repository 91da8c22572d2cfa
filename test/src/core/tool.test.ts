import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  Answer,
  ContextUpdate,
  DEFAULT_TOOL_RETRIES,
  DEFAULT_TOOL_TIMEOUT_MS,
  defineTool,
  InvalidArgumentError,
  isTroupeError,
  Request,
  type ToolDefinition,
  ToolResult,
  TroupeError,
} from '@troupe/core';
import { z } from 'zod';

const base = {
  name: 'add_note',
  description: 'Remember a note',
  parameters: z.object({ note: z.string() }),
  execute: ({ note }: { note: string }) => ({ added: note }),
};

function refusal(definition: unknown): InvalidArgumentError {
  try {
    defineTool(definition as ToolDefinition<z.ZodType, unknown>);
  } catch (error) {
    assert.ok(error instanceof InvalidArgumentError, String(error));
    assert.ok(isTroupeError(error, 'ERR_INVALID_ARGUMENT'));
    return error;
  }
  assert.fail('expected defineTool to refuse');
}

describe('defineTool: validation', () => {
  it('refuses a missing definition', () => {
    assert.match(refusal(undefined).message, /pass a definition object/);
    assert.match(refusal(null).message, /pass a definition object/);
  });

  it('refuses bad names', () => {
    for (const name of ['', 'has space', 'dots.not.ok', 'x'.repeat(65), 42, 'émoji']) {
      assert.match(refusal({ ...base, name }).message, /name must match/, String(name));
    }
  });

  it('a non-string name is refused with a typed error, even a bigint', () => {
    assert.match(refusal({ ...base, name: 10n }).message, /^defineTool\(10n\): name must match/);
    assert.match(refusal({ ...base, name: undefined }).message, /^defineTool\(undefined\): name must match/);
  });

  it('accepts names models accept', () => {
    for (const name of ['a', 'add_note', 'Add-Note-2', 'x'.repeat(64)]) {
      assert.equal(defineTool({ ...base, name }).name, name);
    }
  });

  it('refuses non-zod parameters', () => {
    const e = refusal({ ...base, parameters: { type: 'object' } });
    assert.match(e.message, /^defineTool\("add_note"\): parameters must be a zod schema/);
  });

  it('refuses a missing execute or description', () => {
    assert.match(refusal({ ...base, execute: 'nope' }).message, /execute must be a function/);
    assert.match(refusal({ ...base, description: undefined }).message, /description must be a string/);
  });

  it('refuses bad retries', () => {
    for (const retries of [-1, 1.5, Number.NaN, 101, '2']) {
      assert.match(refusal({ ...base, retries }).message, /retries must be an integer from 0 to 100/, String(retries));
    }
  });

  it('refuses bad timeoutMs', () => {
    for (const timeoutMs of [-1, Number.NaN, Number.POSITIVE_INFINITY, '100']) {
      assert.match(
        refusal({ ...base, timeoutMs }).message,
        /timeoutMs must be a non-negative number/,
        String(timeoutMs),
      );
    }
  });
});

describe('defineTool: defaults', () => {
  it('retries 1, timeoutMs 30000, no approval', () => {
    const tool = defineTool(base);
    assert.equal(DEFAULT_TOOL_RETRIES, 1);
    assert.equal(DEFAULT_TOOL_TIMEOUT_MS, 30_000);
    assert.equal(tool.retries, 1);
    assert.equal(tool.timeoutMs, 30_000);
    assert.equal(tool.requiresApproval, false);
  });

  it('timeoutMs 0 or null means none', () => {
    assert.equal(defineTool({ ...base, timeoutMs: 0 }).timeoutMs, null);
    assert.equal(defineTool({ ...base, timeoutMs: null }).timeoutMs, null);
    assert.equal(defineTool({ ...base, timeoutMs: 250 }).timeoutMs, 250);
  });

  it('retries 0 is kept (one attempt)', () => {
    assert.equal(defineTool({ ...base, retries: 0 }).retries, 0);
  });

  it('requiresApproval is a boolean', () => {
    assert.equal(defineTool({ ...base, requiresApproval: true }).requiresApproval, true);
  });

  it('is frozen and exposes a JSON-schema spec', () => {
    const tool = defineTool(base);
    assert.ok(Object.isFrozen(tool));
    const spec = tool.spec;
    assert.equal(spec, tool.spec, 'computed once');
    assert.equal(spec.name, 'add_note');
    assert.equal(spec.description, 'Remember a note');
    assert.equal(spec.parameters.type, 'object');
    assert.deepEqual(spec.parameters.required, ['note']);
  });
});

describe('ToolResult', () => {
  it('ok carries the value and an optional update', () => {
    const update = ContextUpdate.empty().set('k', 1);
    const r = ToolResult.ok({ n: 1 }, update);
    assert.equal(r.status, 'ok');
    assert.ok(r.status === 'ok' && r.value.n === 1 && r.update === update);
    assert.ok(ToolResult.is(r));
    assert.ok(Object.isFrozen(r));
    const bare = ToolResult.ok(1);
    assert.ok(bare.status === 'ok' && bare.update === undefined);
  });

  it('error from a message is a TroupeError ERR_TOOL_FAILED; from an Error keeps it', () => {
    const fromMessage = ToolResult.error('no such file');
    assert.ok(fromMessage.status === 'error');
    assert.ok(fromMessage.error instanceof TroupeError);
    assert.equal((fromMessage.error as TroupeError).code, 'ERR_TOOL_FAILED');
    assert.equal(fromMessage.error.message, 'no such file');
    const original = new RangeError('out of range');
    const fromError = ToolResult.error(original);
    assert.ok(fromError.status === 'error' && fromError.error === original);
  });

  it('pending mints an id when none is given', () => {
    const r = ToolResult.pending({ kind: 'input', prompt: 'Which environment?' });
    assert.ok(r.status === 'pending');
    assert.match(r.request.id, /^req_[0-9A-Za-z]{16}$/);
    assert.equal(r.request.kind, 'input');
    assert.ok(Object.isFrozen(r.request));
    const empty = ToolResult.pending({ id: '', kind: 'input', prompt: 'p' });
    assert.ok(empty.status === 'pending' && empty.request.id.startsWith('req_'));
    const other = ToolResult.pending({ kind: 'input', prompt: 'p' });
    assert.ok(other.status === 'pending' && other.request.id !== r.request.id);
  });

  it('pending keeps a given id and the optional fields', () => {
    const r = ToolResult.pending({
      id: 'req_given',
      kind: 'approval',
      prompt: 'Deploy?',
      data: { env: 'prod' },
      expiresAt: 5,
    });
    assert.ok(r.status === 'pending');
    assert.deepEqual(r.request, {
      id: 'req_given',
      kind: 'approval',
      prompt: 'Deploy?',
      data: { env: 'prod' },
      expiresAt: 5,
    });
    assert.ok(Request.safeParse(r.request).success);
  });

  it('pending refuses a request the Request schema refuses', () => {
    assert.throws(() => ToolResult.pending({ kind: '', prompt: 'p' }), InvalidArgumentError);
    assert.throws(
      () => ToolResult.pending({ kind: 'input', prompt: 3 as unknown as string }),
      (e: unknown) => isTroupeError(e, 'ERR_INVALID_ARGUMENT') && /request\.prompt/.test((e as Error).message),
    );
  });

  it('is() recognises only built results', () => {
    assert.equal(ToolResult.is({ status: 'ok', value: 1 }), false);
    assert.equal(ToolResult.is(null), false);
    assert.equal(ToolResult.is('ok'), false);
  });
});

describe('Request and Answer schemas', () => {
  it('Request accepts a full and a minimal request', () => {
    assert.ok(Request.safeParse({ id: 'r1', kind: 'input', prompt: 'Which?' }).success);
    assert.ok(Request.safeParse({ id: 'r1', kind: 'approval', prompt: '', data: [1], expiresAt: 10 }).success);
  });

  it('Request refuses missing or empty fields and a non-finite expiry', () => {
    for (const bad of [
      { kind: 'input', prompt: 'x' },
      { id: '', kind: 'input', prompt: 'x' },
      { id: 'r', kind: '', prompt: 'x' },
      { id: 'r', kind: 'input' },
      { id: 'r', kind: 'input', prompt: 'x', expiresAt: Number.POSITIVE_INFINITY },
      { id: 'r', kind: 'input', prompt: 'x', expiresAt: '10' },
    ]) {
      assert.equal(Request.safeParse(bad).success, false, JSON.stringify(bad));
    }
  });

  it('Answer accepts ok/declined answers', () => {
    assert.ok(Answer.safeParse({ id: 'r1', ok: true, data: { env: 'staging' } }).success);
    assert.ok(Answer.safeParse({ id: 'r1', ok: false, reason: 'declined' }).success);
  });

  it('Answer refuses a missing id, a non-boolean ok, a non-string reason', () => {
    for (const bad of [{ ok: true }, { id: '', ok: true }, { id: 'r', ok: 'yes' }, { id: 'r', ok: false, reason: 3 }]) {
      assert.equal(Answer.safeParse(bad).success, false, JSON.stringify(bad));
    }
  });
});
