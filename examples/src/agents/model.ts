// The demo's models: its scripts, or a real model when TROUPE_MODEL_BASE_URL
// is set. Each agent gives `demoModel(...)` as its model: a model factory,
// which Troupe calls on the thread that runs the agent (a subagent's worker,
// the supervisor's thread for a parent) at the agent's first model call, with
// the environment as it is then. The key is read there and never crosses a
// thread; a variable that is wrong fails that agent's run with
// ERR_MODEL_FACTORY, saying which, instead of the import of its module.
import { InvalidArgumentError, type ModelFactory } from '@troupe/core';
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
 * An agent's model in the demo, as a model factory: `script` when
 * `TROUPE_MODEL_BASE_URL` is not set, else `openaiModel` on that server
 * (`options` tune it; the environment picks the server, model and key).
 *
 * @example
 * ```ts
 * model: demoModel(new ScriptedModel(['hello']), { temperature: 0 })
 * ```
 */
export function demoModel(
  script: ScriptedModel,
  options: Omit<OpenAIModelOptions, 'baseURL' | 'model' | 'apiKey'> = {},
): ModelFactory {
  return () => {
    const real = realModelOptions();
    return real === undefined ? script : openaiModel({ ...options, ...real });
  };
}
