/**
 * @troupe/ai-sdk — Troupe models from any AI SDK provider package
 * (`@ai-sdk/anthropic`, `@ai-sdk/google`, `@ai-sdk/openai`,
 * `@ai-sdk/amazon-bedrock`, `@ai-sdk/openai-compatible`, ...): the provider
 * does the talking; this package streams its deltas to the host, sends
 * Troupe's tools and transcript, retries with its own abortable loop, stops
 * on the run's signal and fails with typed errors.
 */

export {
  type AiSdkModelOptions,
  type ResolvedAiSdkModelOptions,
  resolveAiSdkModelOptions,
} from './AiSdkModelOptions.js';
export {
  type AiSdkLanguageModel,
  type AiSdkModel,
  aiSdkModel,
} from './aiSdkModel.js';
export { ModelError, type ModelErrorCode, type ModelErrorDetails } from './ModelError.js';
export { toFunctionTools } from './toFunctionTools.js';
export { MISSING_RESULT, toLanguageModelPrompt } from './toLanguageModelPrompt.js';
