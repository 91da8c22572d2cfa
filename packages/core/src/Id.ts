import { customAlphabet } from 'nanoid';

declare const brand: unique symbol;
/**
 * A string branded with what it identifies, so ids of different kinds do not mix.
 *
 * The brand exists only in types; at run time the value is the plain `T`.
 *
 * @example
 * ```ts
 * type OrderId = Branded<string, 'OrderId'>
 * const id = 'order_42' as OrderId
 * ```
 */
export type Branded<T, B extends string> = T & { readonly [brand]: B };

/**
 * Identifies an agent: a parent's id, or a subagent's `<parentId>-sub-<n>`.
 *
 * @example
 * ```ts
 * const id: AgentId = createId('agent') // 'agent_…'
 * ```
 */
export type AgentId = Branded<string, 'AgentId'>;
/**
 * Identifies one run of an agent (a parent's turn or a subagent's task).
 *
 * @example
 * ```ts
 * const id: RunId = createId('run') // 'run_…'
 * ```
 */
export type RunId = Branded<string, 'RunId'>;
/**
 * Identifies a human-in-the-loop request.
 *
 * @example
 * ```ts
 * const id: RequestId = createId('req') // 'req_…' (16 random characters)
 * ```
 */
export type RequestId = Branded<string, 'RequestId'>;
/**
 * Identifies one tool call of a model turn.
 *
 * @example
 * ```ts
 * const id: ToolCallId = createId('call') // 'call_…'
 * ```
 */
export type ToolCallId = Branded<string, 'ToolCallId'>;

/**
 * The kinds of id {@link createId} mints, and their prefix: `agent_`, `run_`, `req_`, `call_`.
 *
 * @example
 * ```ts
 * const kind: IdKind = 'run'
 * const id = createId(kind) // 'run_…'
 * ```
 */
export type IdKind = 'agent' | 'run' | 'req' | 'call';

// URL-safe, no '-' so that `<parentId>-sub-<n>` stays unambiguous to split.
const random = customAlphabet('0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ', 16);

// Ids minted on hot paths (one per run) are a random prefix drawn once per
// thread plus a counter: unique across threads and processes with the odds of
// the 10-character prefix, at the cost of a string concatenation rather than
// a crypto draw. Request ids are handed to people and persisted: fully random.
const prefix = random().slice(0, 10);
let counter = 0;

/**
 * The one factory of ids: `<kind>_<random>` — a per-thread random prefix and
 * a counter for agents, runs and calls; 16 random characters for requests.
 *
 * Ids of agents, runs and calls are unique but guessable (a counter);
 * only request ids, handed to people, are fully random.
 *
 * @example
 * ```ts
 * const agentId = createId('agent') // AgentId, 'agent_…'
 * const requestId = createId('req') // RequestId, 'req_…'
 * ```
 */
export function createId(kind: 'agent'): AgentId;
export function createId(kind: 'run'): RunId;
export function createId(kind: 'req'): RequestId;
export function createId(kind: 'call'): ToolCallId;
export function createId(kind: IdKind): string {
  if (kind === 'req') return `${kind}_${random()}`;
  counter++;
  return `${kind}_${prefix}${counter.toString(36)}`;
}

/** The id of the `n`th subagent (1-based) spawned by `parentId`: `<parentId>-sub-<n>`. */
export function subagentId(parentId: AgentId, n: number): AgentId {
  return `${parentId}-sub-${n}` as AgentId;
}
