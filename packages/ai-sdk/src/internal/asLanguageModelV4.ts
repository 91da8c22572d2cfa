import type { LanguageModelV4 } from '@ai-sdk/provider';
import { InvalidArgumentError } from '@troupe/core';

/** A language model of any version the AI SDK still speaks. */
export type AnyLanguageModel = LanguageModelV4 | { readonly specificationVersion: 'v2' | 'v3' };

/**
 * A model of version 4 as it is; one of versions 2 or 3 (providers of AI SDK
 * 5 and 6) adapted by the AI SDK's own `wrapLanguageModel`, imported the
 * first time such a model is called: the `ai` package is needed then only,
 * and costs nothing to a thread whose models are version 4.
 */
export async function asLanguageModelV4(model: AnyLanguageModel): Promise<LanguageModelV4> {
  if (model.specificationVersion === 'v4') return model as LanguageModelV4;
  let ai: typeof import('ai');
  try {
    ai = await import('ai');
  } catch (error) {
    throw new InvalidArgumentError(
      `aiSdkModel: this model implements version ${model.specificationVersion} of the language model specification (a provider package of AI SDK 5 or 6); adapting it needs the "ai" package 7 or later: install it (npm install ai), or upgrade the provider package`,
      { cause: error },
    );
  }
  return ai.wrapLanguageModel({ model: model as Parameters<typeof ai.wrapLanguageModel>[0]['model'], middleware: [] });
}
