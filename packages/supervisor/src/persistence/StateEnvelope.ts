import { type AgentId, type LoopState, type Request, TroupeError } from '@troupe/core';

/**
 * The envelope version this code writes. Bumped when the saved shape
 * changes; {@link READABLE_STATE_VERSIONS} lists what it still reads.
 *
 * @example
 * ```ts
 * const saved = JSON.parse('{"version":3}') as { version: number }
 * if (saved.version > STATE_ENVELOPE_VERSION) console.error('written by a newer Troupe: upgrade this process')
 * ```
 */
export const STATE_ENVELOPE_VERSION = 2;

/**
 * Every envelope version this code reads; older ones are upgraded by {@link migrateEnvelope}.
 *
 * @example
 * ```ts
 * const readable = (saved: { version: number }) => READABLE_STATE_VERSIONS.includes(saved.version)
 * ```
 */
export const READABLE_STATE_VERSIONS: readonly number[] = Object.freeze([1, 2]);

/**
 * What a conversation is doing, as saved with its envelope.
 *
 * @example
 * ```ts
 * const { items } = await new MemoryPersistence().listConversations({ tenantId: 't1' })
 * const waiting = items.filter((c) => c.status === ('suspended' satisfies ConversationStatus))
 * ```
 */
export type ConversationStatus = 'idle' | 'running' | 'suspended' | 'stopped';

/**
 * A request waiting for a person, as saved inside an envelope.
 *
 * @example
 * ```ts
 * const show = (p: PendingRequestRecord) => `${p.request.prompt} (asked by ${p.path.at(-1)} at ${new Date(p.openedAt).toISOString()})`
 * ```
 */
export interface PendingRequestRecord {
  readonly request: Request;
  /** Agent ids from the parent agent down to the one whose tool asked. */
  readonly path: readonly AgentId[];
  readonly openedAt: number;
}

/**
 * Version 1, the shape saved before runs and requests had rows of their own. Read, never written.
 *
 * Only {@link migrateEnvelope} should read one.
 *
 * @example
 * ```ts
 * const isV1 = (saved: AnyAgentStateEnvelope): saved is AgentStateEnvelopeV1 => saved.version === 1
 * ```
 */
export interface AgentStateEnvelopeV1 {
  readonly version: 1;
  readonly agentId: AgentId;
  readonly conversationId: string;
  readonly agentName: string;
  readonly state: LoopState;
  readonly pendingRequest: PendingRequestRecord | undefined;
  /** The conversation's own open questions when it is suspended (ids as the host knows them). */
  readonly openRequests?:
    | readonly {
        readonly id: string;
        readonly toolCallId: string;
        readonly local: Request;
        readonly approval: boolean;
      }[]
    | undefined;
  readonly childCounter: number;
  readonly savedAt: number;
}

/**
 * An agent's saved state (version 2): versioned JSON, never holding the
 * scope (the caller re-supplies it on restore). Stores return it migrated
 * to this version whatever version was saved.
 *
 * @example
 * ```ts
 * import { createId } from '@troupe/core'
 *
 * const store = new MemoryPersistence()
 * const envelope: AgentStateEnvelope | undefined = await store.loadState({ tenantId: 't1' }, { agentId: createId('agent'), conversationId: 'c1' })
 * if (envelope?.status === 'suspended') console.log(`${envelope.agentName} waits on ${envelope.waitingOn}`)
 * ```
 */
export interface AgentStateEnvelope {
  readonly version: typeof STATE_ENVELOPE_VERSION;
  readonly agentId: AgentId;
  readonly conversationId: string;
  readonly agentName: string;
  /** What the conversation was doing when this was saved. */
  readonly status: ConversationStatus;
  readonly state: LoopState;
  /** The open request when the agent is suspended (its request, path and time). */
  readonly pendingRequest: PendingRequestRecord | undefined;
  /** The conversation's own open questions when it is suspended (ids as the host knows them). */
  readonly openRequests?:
    | readonly {
        readonly id: string;
        readonly toolCallId: string;
        readonly local: Request;
        readonly approval: boolean;
      }[]
    | undefined;
  /** The host-visible id of the request the conversation waits on (a row of the store's requests). */
  readonly waitingOn: string | undefined;
  /** The run (RunTree node) of the message being handled or last handled. */
  readonly runId: string | undefined;
  /** How many subagents this agent has spawned (ids are never reused). */
  readonly childCounter: number;
  readonly savedAt: number;
  /**
   * A suspended envelope's `state` is its message's run, mid-way: this is the
   * conversation as it was before that message — what the agent goes back to
   * when the message fails (or its reply cannot be saved), and what the
   * reply's usage counts from, also after a restore. Absent in envelopes saved
   * before it existed (a restore then takes `state` for both).
   */
  readonly before?: MessageStartRecord | undefined;
  /**
   * The keys — never the values — of the `toolContext` the conversation was
   * started with. Like the scope, a toolContext is never saved and is given
   * again on restore; a restore whose toolContext holds none of these keys
   * (forgotten, or misspelt) is refused (`ERR_TOOL_CONTEXT_MISSING`) rather
   * than run with tools reading `undefined`. Absent in envelopes saved before it existed (nothing is checked then).
   */
  readonly toolContextKeys?: readonly string[] | undefined;
  /**
   * Set by a store on `loadState` (never saved inside the envelope): how many
   * times this envelope has been saved. Pass it back as
   * the `basedOn` of the next `commit` so a store refuses a save from a stale copy.
   * Absent from stores that do not fence.
   */
  readonly revision?: number | undefined;
}

/**
 * The conversation before the message a suspended envelope is in the middle
 * of (see {@link AgentStateEnvelope.before}). A message only appends to the
 * messages, so they are not saved twice: they are the first `messageCount`
 * of the envelope's `state.messages`.
 *
 * @example
 * ```ts
 * declare const envelope: AgentStateEnvelope
 * const before = envelope.before
 * if (before !== undefined) console.log(`the message began after ${before.messageCount} messages, ${before.state.turns} turns`)
 * ```
 */
export interface MessageStartRecord {
  readonly messageCount: number;
  readonly state: Omit<LoopState, 'messages'>;
}

/**
 * Any envelope version this code reads.
 *
 * @example
 * ```ts
 * declare const saved: AnyAgentStateEnvelope
 * const current: AgentStateEnvelope = migrateEnvelope(saved)
 * ```
 */
export type AnyAgentStateEnvelope = AgentStateEnvelopeV1 | AgentStateEnvelope;

function versionOf(saved: unknown): unknown {
  return typeof saved === 'object' && saved !== null ? (saved as { version?: unknown }).version : undefined;
}

/**
 * Upgrade a saved envelope of any readable version to the current one (a
 * current one is returned as is). Stores call it on every read, so a
 * caller only ever sees {@link STATE_ENVELOPE_VERSION}.
 *
 * v1 → v2: `status` is `suspended` when a request was pending, else `idle`;
 * `waitingOn` is the pending request's id; `runId` is unknown.
 *
 * @throws TroupeError `ERR_STORE_VERSION` for a version this code does not
 *   read (written by a newer Troupe: upgrade this process), or
 *   `ERR_STORE_CORRUPT` for something that is not an envelope at all.
 *
 * @example
 * ```ts
 * import { readFileSync } from 'node:fs'
 *
 * const envelope = migrateEnvelope(JSON.parse(readFileSync('agent-state.json', 'utf8')))
 * envelope.version // 2
 * ```
 */
export function migrateEnvelope(saved: unknown, where = 'a saved state'): AgentStateEnvelope {
  const version = versionOf(saved);
  if (version === STATE_ENVELOPE_VERSION) return saved as AgentStateEnvelope;
  if (version === 1) {
    const v1 = saved as AgentStateEnvelopeV1;
    const pending = v1.pendingRequest ?? undefined;
    return {
      version: STATE_ENVELOPE_VERSION,
      agentId: v1.agentId,
      conversationId: v1.conversationId,
      agentName: v1.agentName,
      status: pending === undefined ? 'idle' : 'suspended',
      state: v1.state,
      pendingRequest: pending,
      ...(v1.openRequests === undefined ? {} : { openRequests: v1.openRequests }),
      waitingOn: pending?.request.id,
      runId: undefined,
      childCounter: v1.childCounter,
      savedAt: v1.savedAt,
    };
  }
  if (typeof version === 'number' && Number.isInteger(version) && version > STATE_ENVELOPE_VERSION) {
    throw new TroupeError(
      `${where} has envelope version ${version}; this Troupe reads versions ${READABLE_STATE_VERSIONS.join(', ')}: upgrade Troupe to read it (it was written by a newer one)`,
      { code: 'ERR_STORE_VERSION' },
    );
  }
  throw new TroupeError(
    `${where} is not a Troupe state envelope (version ${JSON.stringify(version) ?? 'missing'}): restore the store from a backup or delete the conversation`,
    { code: 'ERR_STORE_CORRUPT' },
  );
}

/**
 * The conversation as it was before the message `saved` is in the middle of
 * (its `state` itself when it holds no {@link MessageStartRecord}).
 *
 * @throws TroupeError `ERR_STORE_CORRUPT` for a record that does not fit its envelope.
 */
export function stateBefore(saved: AgentStateEnvelope, where = 'a saved state'): LoopState {
  const before: unknown = saved.before;
  if (before === undefined || before === null) return saved.state;
  const messages = saved.state?.messages;
  const r = before as { messageCount?: unknown; state?: unknown };
  if (
    typeof before !== 'object' ||
    !Array.isArray(messages) ||
    typeof r.messageCount !== 'number' ||
    !Number.isSafeInteger(r.messageCount) ||
    r.messageCount < 0 ||
    r.messageCount > messages.length ||
    typeof r.state !== 'object' ||
    r.state === null ||
    Array.isArray(r.state) ||
    typeof (r.state as { usage?: unknown }).usage !== 'object'
  ) {
    throw new TroupeError(
      `${where} has a malformed "before" (the conversation before its suspended message): restore the store from a backup or delete the conversation`,
      { code: 'ERR_STORE_CORRUPT' },
    );
  }
  return { ...(r.state as Omit<LoopState, 'messages'>), messages: messages.slice(0, r.messageCount) };
}
