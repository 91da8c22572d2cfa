/**
 * @troupe/openai — Troupe models for OpenAI-compatible chat-completions
 * servers (OpenAI, Ollama, vLLM, llama.cpp server, LM Studio, OpenRouter),
 * on the official `openai` package. Streams, normalises what real servers
 * send, retries with its own abortable loop and stops on the run's signal.
 */
export {
  ChatStreamAccumulator,
  type ChatStreamAccumulatorOptions,
  type NormalisedAnswer,
  normaliseChunks,
} from './ChatStreamAccumulator.js';
export { ModelError, type ModelErrorCode, type ModelErrorDetails } from './ModelError.js';
export {
  OPENAI_BASE_URL,
  type OpenAIModelOptions,
  type ResolvedOpenAIModelOptions,
  resolveOpenAIModelOptions,
} from './OpenAIModelOptions.js';
export { type OpenAIModel, openaiModel } from './openaiModel.js';
export { MISSING_RESULT, toChatMessages } from './toChatMessages.js';
export { toChatTools } from './toChatTools.js';
