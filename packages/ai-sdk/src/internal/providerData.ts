// What an answer's provider needs back on the next turn, kept on its tool
// calls (`ModelToolCall.providerData`, which the transcript keeps with the
// call): the provider options each call came with (Gemini's thought
// signature, an OpenAI item id), and, on the first call of the answer, its
// reasoning parts with theirs (Anthropic's signed thinking, which the API
// requires back before the tool results of a turn that thought). Under one
// key, so data another adapter wrote is never read as ours.
import type { SharedV4ProviderOptions } from '@ai-sdk/provider';

/** The key of this package's data in `ModelToolCall.providerData`. */
export const PROVIDER_DATA_KEY = 'aiSdk';

/** A reasoning part of an answer, as the next prompt must show it. */
export interface KeptReasoning {
  readonly text: string;
  readonly providerOptions: SharedV4ProviderOptions | undefined;
}

/** What one call keeps. */
export interface CallData {
  readonly providerOptions?: SharedV4ProviderOptions | undefined;
  readonly reasoning?: readonly KeptReasoning[] | undefined;
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** `providerData` for a call: `undefined` when there is nothing to keep (the common case). */
export function writeProviderData(data: CallData): Readonly<Record<string, unknown>> | undefined {
  const kept: Record<string, unknown> = {};
  if (data.providerOptions !== undefined && Object.keys(data.providerOptions).length > 0) {
    kept.providerOptions = data.providerOptions;
  }
  if (data.reasoning !== undefined && data.reasoning.length > 0) {
    kept.reasoning = data.reasoning.map((r) =>
      r.providerOptions === undefined ? { text: r.text } : { text: r.text, providerOptions: r.providerOptions },
    );
  }
  return Object.keys(kept).length === 0 ? undefined : { [PROVIDER_DATA_KEY]: kept };
}

/** This package's data in a call's `providerData`, checked loosely (it was saved as JSON and may be old). */
export function readProviderData(providerData: unknown): CallData | undefined {
  if (!isRecord(providerData)) return undefined;
  const ours = providerData[PROVIDER_DATA_KEY];
  if (!isRecord(ours)) return undefined;
  const providerOptions = isRecord(ours.providerOptions)
    ? (ours.providerOptions as SharedV4ProviderOptions)
    : undefined;
  const reasoning = Array.isArray(ours.reasoning)
    ? ours.reasoning.flatMap((r): KeptReasoning[] =>
        isRecord(r) && typeof r.text === 'string'
          ? [
              {
                text: r.text,
                providerOptions: isRecord(r.providerOptions)
                  ? (r.providerOptions as SharedV4ProviderOptions)
                  : undefined,
              },
            ]
          : [],
      )
    : undefined;
  return { providerOptions, reasoning };
}
