import {
  assertCloneable,
  assertJson,
  deepFreeze,
  InvalidArgumentError,
  isDeepFrozen,
  type Metadata,
} from '@troupe/core';
import { describeValue } from '@troupe/core/internal';

const EMPTY_CONTEXT: Readonly<Record<string, unknown>> = Object.freeze({});

/** Each toolContext the host passed, as sealed: a frozen copy, made once per object. */
const sealedToolContexts = new WeakMap<object, Readonly<Record<string, unknown>>>();

/**
 * A toolContext as every run gets it, for parent agents and spawns alike: a
 * plain object of static data, checked cloneable and frozen — a frozen copy
 * (the caller's object stays theirs), made once per object (a fan-out passes
 * the same one to every spawn). One shared frozen empty object for none.
 */
export function sealToolContext(toolContext: unknown): Readonly<Record<string, unknown>> {
  if (toolContext === undefined) return EMPTY_CONTEXT;
  const notRecord = () =>
    new InvalidArgumentError(
      `toolContext must be a plain object of static data (feature flags, request ids), got ${describeValue(toolContext)}`,
    );
  if (typeof toolContext !== 'object' || toolContext === null) throw notRecord();
  const known = sealedToolContexts.get(toolContext);
  if (known !== undefined) {
    // Frozen all the way down, it cannot have changed. One holding a Map or a Set can (freezing
    // does not stop `set`): checked again, so what it holds now is refused with its path, not by
    // the serializer when a run is posted.
    if (!isDeepFrozen(known)) assertCloneable(known, 'toolContext');
    return known;
  }
  // Cloneable first: a Proxy is refused before anything asks it a question (Array.isArray throws
  // on a revoked one).
  assertCloneable(toolContext, 'toolContext');
  if (Array.isArray(toolContext)) throw notRecord();
  const sealed =
    Object.keys(toolContext).length === 0 ? EMPTY_CONTEXT : deepFreeze({ ...(toolContext as Record<string, unknown>) });
  sealedToolContexts.set(toolContext, sealed);
  sealedToolContexts.set(sealed, sealed);
  return sealed;
}

/**
 * Refuse to restore a conversation with a toolContext that holds none of the
 * keys it was started with (`saved`: the keys its envelope holds; none for an
 * envelope saved before they were): one forgotten — `answer(id, answer, {
 * scope })` after a restart — or misspelt, whose tools would read
 * `undefined`. A toolContext is never saved, as the scope, so it must be given
 * again. One that holds some of them passes: a key left out may be one its
 * tools read as optional (the types hold a typed caller to the required ones).
 */
export function checkRestoredToolContext(
  saved: readonly string[] | undefined,
  toolContext: Readonly<Record<string, unknown>>,
  where: { readonly agentId: string; readonly conversationId: string; readonly agentName: string },
): void {
  if (saved === undefined || !Array.isArray(saved)) return;
  const keys = saved.filter((key): key is string => typeof key === 'string');
  if (keys.length === 0 || keys.some((key) => Object.hasOwn(toolContext, key))) return;
  const named = keys.map((k) => JSON.stringify(k)).join(', ');
  const given = Object.keys(toolContext);
  throw new InvalidArgumentError(
    `conversation ${where.conversationId} (agent ${where.agentId}, "${where.agentName}") was started with toolContext keys ${named}, and is being restored with ${given.length === 0 ? 'no toolContext' : `none of them (given: ${given.map((k) => JSON.stringify(k)).join(', ')})`}: its tools would read undefined. A toolContext is never saved (as the scope): pass it again — startAgent(agent, { agentId, conversationId, scope, toolContext }), or answer(requestId, answer, { scope, toolContext }) — nothing was restored`,
    { code: 'ERR_TOOL_CONTEXT_MISSING' },
  );
}

// Metadata becomes the state's, saved as JSON: a plain object JSON carries exactly (ContextUpdate
// refuses the same values). A deep-frozen one — a fan-out passes one snapshot to every spawn — is
// checked once.
const checkedMetadata = new WeakSet<object>();

/** Check a metadata snapshot the host passed: plain JSON data, cloneable, not nested too deeply. */
export function checkMetadata(metadata: unknown): void {
  if (typeof metadata === 'object' && metadata !== null && checkedMetadata.has(metadata)) return;
  const notRecord = () =>
    new InvalidArgumentError(
      `metadata must be a plain object of JSON data (its keys are the state's metadata), got ${describeValue(metadata)}`,
    );
  if (typeof metadata !== 'object' || metadata === null) throw notRecord();
  // Cloneable first: a Proxy is refused before anything asks it a question (Array.isArray throws
  // on a revoked one).
  assertCloneable(metadata, 'metadata');
  if (Array.isArray(metadata)) throw notRecord();
  try {
    assertJson(metadata, 'metadata');
  } catch (error) {
    if (!(error instanceof RangeError)) throw error;
    throw new InvalidArgumentError(
      'metadata is nested too deeply to be copied or saved: pass plain data, nested less deeply',
      {
        code: 'ERR_NOT_CLONEABLE',
      },
    );
  }
  if (isDeepFrozen(metadata)) checkedMetadata.add(metadata);
}

/** A copy of the host's metadata; one too deep to copy is refused like one that cannot cross a thread. */
export function cloneMetadata(metadata: Metadata): Metadata {
  try {
    return structuredClone(metadata);
  } catch (error) {
    throw new InvalidArgumentError(
      `metadata cannot be copied (${(error as Error)?.message ?? String(error)}): pass plain data, nested less deeply`,
      { code: 'ERR_NOT_CLONEABLE', cause: error },
    );
  }
}
