// The demo's models: its scripts, or a real model when TROUPE_MODEL_BASE_URL
// is set. Each agent module calls `demoModel`, so a subagent's model is built
// in the worker that runs it, from that worker's environment: the key is read
// there and never crosses a thread.
import { InvalidArgumentError, type Model } from '@troupe/core';
import type { ScriptedModel } from '@troupe/core/testing';
import { type OpenAIModelOptions, openaiModel } from '@troupe/openai';

/**
 * The real model the environment asks for: `TROUPE_MODEL_BASE_URL` (an
 * OpenAI-compatible root ending in `/v1`), `TROUPE_MODEL`, and the key in
 * `TROUPE_MODEL_API_KEY` or `OPENAI_API_KEY` (none for Ollama). `undefined`
 * when no base URL is set. Throws an `InvalidArgumentError` naming the
 * variable to set when the model is missing.
 */
export function realModelOptions(env: NodeJS.ProcessEnv = process.env): OpenAIModelOptions | undefined {
  const baseURL = env.TROUPE_MODEL_BASE_URL;
  if (baseURL === undefined || baseURL === '') return undefined;
  const model = env.TROUPE_MODEL;
  if (model === undefined || model === '') {
    throw new InvalidArgumentError(
      'TROUPE_MODEL_BASE_URL is set but TROUPE_MODEL is not: set TROUPE_MODEL to a model the server has (gpt-4.1-mini on OpenAI, llama3.2 on Ollama)',
    );
  }
  return { baseURL, model, apiKey: env.TROUPE_MODEL_API_KEY || env.OPENAI_API_KEY || undefined };
}

/**
 * An agent's model in the demo: `script` when `TROUPE_MODEL_BASE_URL` is not
 * set, else `openaiModel` on that server (`options` tune it; the environment
 * picks the server, model and key). A configuration `openaiModel` refuses does
 * not fail the module's import: every call of the model rejects with that
 * typed error instead (the demo checks the model before it starts).
 *
 * @example
 * ```ts
 * model: demoModel(new ScriptedModel(['hello']), { temperature: 0 })
 * ```
 */
export function demoModel(
  script: ScriptedModel,
  options: Omit<OpenAIModelOptions, 'baseURL' | 'model' | 'apiKey'> = {},
): Model {
  let name = 'misconfigured';
  try {
    const real = realModelOptions();
    if (real === undefined) return script;
    name = real.model;
    return openaiModel({ ...options, ...real });
  } catch (error) {
    return { name, generate: () => Promise.reject(error) };
  }
}
