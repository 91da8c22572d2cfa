// Before the demo runs on a real model: one call to it, so that a wrong base
// URL, a server that is not there or a refused key is one line saying what
// failed and which variable to fix — not a scene failing halfway through.
import { isTroupeError } from '@troupe/core';
import { openaiModel } from '@troupe/openai';
import { realModelOptions } from '../agents/model.js';

/** What the environment chose, and whether it answers. */
export type ModelCheck =
  | { readonly status: 'scripted' }
  | { readonly status: 'ready'; readonly model: string; readonly baseURL: string }
  | { readonly status: 'failed'; readonly line: string };

// The model's messages name its options; say which variable holds each.
const URL_AND_MODEL = 'baseURL is TROUPE_MODEL_BASE_URL, the model TROUPE_MODEL';
const KEY = 'apiKey is TROUPE_MODEL_API_KEY or OPENAI_API_KEY';
const NOTES: Readonly<Record<string, string>> = {
  ERR_MODEL_AUTH: KEY,
  ERR_MODEL_CONNECTION: URL_AND_MODEL,
  ERR_MODEL_BAD_REQUEST: URL_AND_MODEL,
  ERR_MODEL_TIMEOUT: URL_AND_MODEL,
  ERR_MODEL_STREAM_IDLE: URL_AND_MODEL,
};

/** The one line for a failed check: the error's message (what failed, what to change), and where the demo reads it. */
function lineFor(error: unknown): string {
  const message = (error instanceof Error ? error.message : String(error)).replace(/\s+/g, ' ').trim();
  const code = isTroupeError(error) ? error.code : undefined;
  const note =
    code === undefined ? undefined : message.startsWith('openaiModel:') ? `${URL_AND_MODEL}, ${KEY}` : NOTES[code];
  return `the model check failed: ${message} (${note === undefined ? '' : `${note}; `}or unset TROUPE_MODEL_BASE_URL to run the demo on its scripts)`;
}

/**
 * `scripted` when `TROUPE_MODEL_BASE_URL` is not set. Otherwise one short
 * call to the model the demo's agents will use (one attempt, 30 s bound):
 * `ready`, or `failed` with the line to print.
 */
export async function checkModel(env: NodeJS.ProcessEnv = process.env): Promise<ModelCheck> {
  try {
    const options = realModelOptions(env);
    if (options === undefined) return { status: 'scripted' };
    const model = openaiModel({ ...options, maxAttempts: 1, timeoutMs: 30_000, streamIdleTimeoutMs: 30_000 });
    await model.generate({
      messages: [{ role: 'user', content: 'Answer with the single word: ready' }],
      tools: [],
      signal: new AbortController().signal,
    });
    return { status: 'ready', model: model.name, baseURL: model.options.baseURL };
  } catch (error) {
    return { status: 'failed', line: lineFor(error) };
  }
}
