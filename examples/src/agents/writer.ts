// A subagent that writes prose, the one whose tokens the demo streams. Its
// model is the OpenAI-compatible server the environment names — built in
// the worker that runs it, from that worker's environment, so a key never
// crosses a thread. The SDK is loaded on the first call only.
import { defineAgent, InvalidArgumentError, type Model, type ModelRequest } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';

/** The server, model and key the environment names; `undefined` without `TROUPE_MODEL_BASE_URL`. */
export interface ModelConfig {
  readonly baseURL: string;
  readonly model: string;
  readonly apiKey: string | undefined;
}

/**
 * Read `TROUPE_MODEL_BASE_URL` (an OpenAI-compatible root ending in `/v1`),
 * `TROUPE_MODEL` and the key (`TROUPE_MODEL_API_KEY` or `OPENAI_API_KEY`; none
 * for Ollama). Throws an `InvalidArgumentError` naming the variable to set.
 */
export function modelConfig(env: NodeJS.ProcessEnv = process.env): ModelConfig | undefined {
  const baseURL = env.TROUPE_MODEL_BASE_URL;
  if (baseURL === undefined || baseURL === '') return undefined;
  const model = env.TROUPE_MODEL;
  if (model === undefined || model === '') {
    throw new InvalidArgumentError(
      'TROUPE_MODEL_BASE_URL is set but TROUPE_MODEL is not: set TROUPE_MODEL to a model the server has (gpt-4.1-mini on OpenAI, llama3.2 on Ollama), or unset TROUPE_MODEL_BASE_URL',
    );
  }
  return { baseURL, model, apiKey: env.TROUPE_MODEL_API_KEY || env.OPENAI_API_KEY || undefined };
}

/** The configured server's model, loaded on first use; a configuration error rejects every call. */
function writerModel(): Model {
  let config: ModelConfig | undefined;
  try {
    config = modelConfig();
  } catch (error) {
    return { name: 'misconfigured', generate: () => Promise.reject(error) };
  }
  if (config === undefined) return ScriptedModel.answering('(no model configured: set TROUPE_MODEL_BASE_URL)');
  const options = config;
  let loaded: Promise<Model> | undefined;
  return {
    name: options.model,
    provider: 'openai-compatible',
    generate: async (request: ModelRequest) => {
      loaded ??= import('@troupe/openai').then(({ openaiModel }) =>
        openaiModel({ ...options, temperature: 0.2, maxAttempts: 2, timeoutMs: 60_000, streamIdleTimeoutMs: 30_000 }),
      );
      return (await loaded).generate(request);
    },
  };
}

/** Writes the short paragraph its task asks for, in plain text. No tools. */
export const writer = defineAgent({
  name: 'writer',
  description: 'Writes a short paragraph',
  module: import.meta.url,
  instructions:
    'You write for engineers. Answer in plain text (no markdown, no lists), in at most three short sentences, using only the figures you are given.',
  model: writerModel(),
});
