import type { LoopState, Metadata } from '@troupe/core';

// Shared by every idle state that holds nothing there: frozen, so no state can change them, and
// every reader treats a state's lists as read-only anyway (a turn makes new ones).
const NO_ITEMS: readonly never[] = Object.freeze([]);
const NO_METADATA: Metadata = Object.freeze({});

// A frozen plain object without properties: nothing in it, nothing can be put in it.
function isEmptyFrozenRecord(value: object): boolean {
  if (Object.getPrototypeOf(value) !== Object.prototype || !Object.isFrozen(value)) return false;
  for (const _ in value) return false;
  return Object.getOwnPropertyNames(value).length === 0 && Object.getOwnPropertySymbols(value).length === 0;
}

// `usage` as a frozen value (a copy, unless it is frozen already: the caller's object stays its own).
function frozenUsage<U extends object | undefined>(usage: U): U {
  return usage === undefined || Object.isFrozen(usage) ? usage : (Object.freeze({ ...usage }) as U);
}

/**
 * The state an idle parent agent keeps between messages, at the size of what it holds, frozen. A
 * turn builds its lists by spreading and pushing, and V8 leaves such an array with up to six times
 * the slots it uses (an idle transcript of 11 messages was 272 B of slots for 88 B of them); a
 * state's empty lists and its empty, frozen metadata are each an object of their own. Kept for
 * every idle conversation, that was a third of what one costs: the messages are copied into a list
 * of their exact length, and the empty parts are one shared frozen value.
 *
 * Frozen — the state, its list of messages, its usage — it cannot change, and a store that keeps
 * values as copies may keep it as itself (the in-memory store does, when every value in it is
 * frozen: see its HeldState): the agent and its store then hold one state, not two. Every reader
 * treats a state as read-only anyway (a turn makes a new one).
 *
 * The same messages, in the same order, the same values: only the containers change.
 */
export function compactIdleState(state: LoopState): LoopState {
  // Every key written out (the type makes a key added to LoopState a compile error here): a literal
  // keeps them all in the object (120 B); a spread put most in a property array beside it (144 B).
  const kept: { readonly [K in keyof Required<LoopState>]: LoopState[K] } = {
    agentId: state.agentId,
    messages: Object.freeze(state.messages.slice()),
    todos: state.todos.length === 0 ? NO_ITEMS : state.todos,
    metadata: isEmptyFrozenRecord(state.metadata) ? NO_METADATA : state.metadata,
    updates: state.updates.length === 0 ? NO_ITEMS : state.updates,
    events: state.events.length === 0 ? NO_ITEMS : state.events,
    turns: state.turns,
    usage: frozenUsage(state.usage),
    childUsage: frozenUsage(state.childUsage),
    failedTurns: state.failedTurns,
    messageStartTurn: state.messageStartTurn,
    pending: state.pending,
  };
  return Object.freeze(kept);
}
