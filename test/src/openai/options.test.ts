// openaiModel's options: checked once, at construction; one test per rule.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidArgumentError } from '@troupe/core';
import { type OpenAIModelOptions, openaiModel, resolveOpenAIModelOptions } from '@troupe/openai';

function refused(options: unknown, message: RegExp): void {
  assert.throws(
    () => openaiModel(options as OpenAIModelOptions),
    (error: unknown) => {
      assert.ok(error instanceof InvalidArgumentError, String(error));
      assert.equal(error.code, 'ERR_INVALID_ARGUMENT');
      assert.match(error.message, message);
      assert.ok(!error.message.includes('\n'));
      return true;
    },
  );
}

const local = 'http://127.0.0.1:11434/v1';

describe('openaiModel options', () => {
  it('needs an options object', () => refused(undefined, /pass an options object/));
  it('needs a model name', () => refused({ baseURL: local }, /model is invalid .*pass the model name/));
  it('refuses an empty model name', () => refused({ model: '  ', baseURL: local }, /model is invalid/));
  it('refuses a base URL that is not http(s)', () =>
    refused(
      { model: 'm', baseURL: 'ftp://x/v1' },
      /baseURL is invalid \(got "ftp:\/\/x\/v1"\): pass an http\(s\) URL/,
    ));
  it('refuses a base URL that is not a URL', () => refused({ model: 'm', baseURL: 'localhost:11434' }, /baseURL/));
  it('refuses maxAttempts outside 1..20', () => {
    refused({ model: 'm', baseURL: local, maxAttempts: 0 }, /maxAttempts is invalid \(got 0\): pass an integer from 1/);
    refused({ model: 'm', baseURL: local, maxAttempts: 2.5 }, /maxAttempts/);
  });
  it('refuses a stream idle timeout of 0', () =>
    refused({ model: 'm', baseURL: local, streamIdleTimeoutMs: 0 }, /streamIdleTimeoutMs is invalid \(got 0\)/));
  it('refuses a negative retry-after cap', () =>
    refused({ model: 'm', baseURL: local, retryAfterCapMs: -1 }, /retryAfterCapMs is invalid/));
  it('refuses a timeout past what a timer can wait', () =>
    refused({ model: 'm', baseURL: local, timeoutMs: 2 ** 31 }, /timeoutMs is invalid/));
  it('refuses an unknown option by name', () =>
    refused({ model: 'm', baseURL: local, retries: 5 }, /unknown option retries/));
  it('refuses an empty key without showing it', () => {
    refused({ model: 'm', baseURL: local, apiKey: '' }, /apiKey is invalid \(got \(hidden\)\)/);
  });
  it('needs a key for api.openai.com, and says where to put it', () => {
    assert.throws(
      () => resolveOpenAIModelOptions({ model: 'gpt-4.1-mini' }, {}),
      /no API key for api\.openai\.com: pass apiKey or set OPENAI_API_KEY/,
    );
  });

  it('defaults: what the issue names, the key from OPENAI_API_KEY only when none is passed', () => {
    const o = resolveOpenAIModelOptions({ model: 'gpt-4.1-mini' }, { OPENAI_API_KEY: 'sk-env' });
    assert.equal(o.apiKey, 'sk-env');
    assert.equal(o.baseURL, 'https://api.openai.com/v1');
    assert.equal(o.provider, 'openai');
    assert.equal(o.maxAttempts, 3);
    assert.equal(o.retryAfterCapMs, 60_000);
    assert.equal(o.streamIdleTimeoutMs, 120_000);
    assert.equal(o.stream, true);
    assert.equal(o.strictTools, false);
    assert.equal(
      resolveOpenAIModelOptions({ model: 'm', apiKey: 'sk-mine' }, { OPENAI_API_KEY: 'sk-env' }).apiKey,
      'sk-mine',
    );
    const ollama = resolveOpenAIModelOptions({ model: 'llama3.2', baseURL: `${local}/` }, {});
    assert.equal(ollama.apiKey, undefined);
    assert.equal(ollama.baseURL, local, 'a trailing slash is dropped');
    assert.equal(ollama.provider, 'openai-compatible');
  });

  it('undefined means not given; the model shows its options without the key', () => {
    const model = openaiModel({
      model: 'm',
      baseURL: local,
      apiKey: 'sk-secret',
      maxAttempts: undefined,
      provider: 'ollama',
    });
    assert.equal(model.options.maxAttempts, 3);
    assert.equal(model.provider, 'ollama');
    assert.ok(!JSON.stringify(model.options).includes('sk-secret'));
    assert.ok(Object.isFrozen(model));
  });
});
