import { createId } from '../Id.js';
import type { AssistantMessage, ModelToolCall } from '../Model.js';

const NO_CALLS: { calls: ModelToolCall[]; malformed: Map<string, string> } = Object.freeze({
  calls: [],
  malformed: new Map(),
}) as never;

/**
 * Normalise what a model returned; malformed tool calls become calls that fail
 * with a clear error (`ERR_TOOL_VALIDATION`, in the transcript and the
 * outcome, never run).
 *
 * A call without an id, or with an id an earlier call of the same answer has,
 * is one of them. Its id is the identity the call is recorded under (the
 * result it is paired with, tool events, persisted tool-call records), so
 * Troupe does not invent one and run the call under it: a Model must give
 * every call a unique id (model adapters for servers that send none, such as
 * `@troupe/openai`, make them). The id minted here only pairs the error
 * result with its entry in the transcript.
 */
export function normaliseCalls(message: AssistantMessage): { calls: ModelToolCall[]; malformed: Map<string, string> } {
  const raw = (message as { toolCalls?: unknown }).toolCalls;
  if (raw === undefined || raw === null || (Array.isArray(raw) && raw.length === 0)) return NO_CALLS;
  const calls: ModelToolCall[] = [];
  const malformed = new Map<string, string>();
  if (!Array.isArray(raw)) {
    const id = createId('call');
    calls.push({ id, name: 'invalid', arguments: null });
    malformed.set(id, 'toolCalls must be an array of { id, name, arguments }');
    return { calls, malformed };
  }
  const seen = new Set<string>();
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i] as Partial<ModelToolCall> | null;
    const given: unknown = typeof c === 'object' && c !== null ? c.id : undefined;
    const unique = typeof given === 'string' && given.length > 0 && !seen.has(given);
    const id = unique ? given : (createId('call') as string);
    seen.add(id);
    if (!unique && typeof c === 'object' && c !== null && typeof c.name === 'string' && c.name.length > 0) {
      calls.push({ id, name: c.name, arguments: c.arguments ?? null });
      malformed.set(
        id,
        typeof given === 'string' && given.length > 0
          ? `call ${i + 1} ("${c.name}") of the answer has the id "${given}" of an earlier call of the same answer, so it was not run: a Model must give every tool call of an answer its own id`
          : `call ${i + 1} ("${c.name}") of the answer has no id, so it was not run: a Model must give every tool call an id (its result is paired with the call by it)`,
      );
      continue;
    }
    if (typeof c !== 'object' || c === null || typeof c.name !== 'string' || c.name.length === 0) {
      calls.push({ id, name: typeof c?.name === 'string' && c.name !== '' ? c.name : 'invalid', arguments: null });
      malformed.set(id, 'a tool call must have a name (string), an id and arguments');
      continue;
    }
    let args: unknown = c.arguments;
    if (typeof args === 'string') {
      // Providers often send arguments as JSON text.
      try {
        args = JSON.parse(args);
      } catch {
        calls.push({ id, name: c.name, arguments: args });
        malformed.set(id, `arguments of "${c.name}" are not valid JSON`);
        continue;
      }
    }
    // A well-formed call is kept as is (no copy per call: a turn may hold a hundred).
    calls.push(
      id === c.id && args === c.arguments && args !== undefined && args !== null
        ? (c as ModelToolCall)
        : { id, name: c.name, arguments: args ?? {} },
    );
  }
  return { calls, malformed };
}
