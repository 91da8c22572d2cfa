import { PersistenceRules as R, sealParsedMessages, splittable } from './PersistenceRules.js';

// How the memory store holds a value without a second copy of what cannot change. The store's
// rule is that of every store: what it keeps is a copy, so nothing the caller does afterwards
// reaches it. A message the agent loop sealed (a frozen plain record of strings, finite numbers,
// booleans and nulls) cannot change and reads back from JSON as an equal object: holding it is
// holding its JSON, for nothing. Everything else is held as JSON text, flat.

/** A message as the store holds it: the sealed message itself, or its JSON text. */
export type HeldMessage = object | string;

/**
 * The envelope of an idle conversation whose state cannot change, held as itself: its fields, and
 * its state — frozen by its writer, every value in it JSON writes back as itself — as that object
 * (the agent that saved it keeps the same one: see {@link holdRecord}).
 */
export interface HeldShell {
  readonly version: unknown;
  readonly agentId: string;
  readonly conversationId: string;
  readonly agentName: unknown;
  readonly status: unknown;
  readonly childCounter: unknown;
  readonly savedAt: unknown;
  readonly state: object;
}

/** A state envelope as the store holds it. */
export interface HeldRecord {
  /**
   * The record as JSON, with `state.messages` written as their number when `messages` is set; or,
   * for an envelope whose state cannot change, the record itself ({@link HeldShell}).
   */
  readonly shell: string | HeldShell;
  /** The state's messages, when they were split off the record (with a held shell: always). */
  readonly messages: readonly HeldMessage[] | undefined;
}

/** A record {@link holdRecord} made, with how many of its messages it took from the record held before. */
export interface NewHeldRecord extends HeldRecord {
  /** How many messages at the start of its list are those of `before` (the same objects, in place). */
  readonly kept: number;
}

/**
 * `text` as one flat string. What `JSON.stringify` and `+` return may be a rope — a tree of
 * pieces, each a string of its own, some of them slices that keep a larger string alive — which
 * costs two to three times its characters while it is kept. Converting a string to a number makes
 * V8 flatten it in place (the rope's pieces are let go), and nothing else is needed here.
 */
export function flat(text: string): string {
  Number(text);
  return text;
}

/**
 * True when `m` can be held as it is: frozen, a plain object whose own properties are all
 * enumerable, string-keyed data properties holding what JSON writes back as itself (a string, a
 * boolean, null, a finite number other than -0) — so a copy through JSON would be equal to it.
 */
function sealedAsJson(m: unknown): m is object {
  if (typeof m !== 'object' || m === null || !Object.isFrozen(m) || Object.getPrototypeOf(m) !== Object.prototype) {
    return false;
  }
  let keys = 0;
  for (const key in m) {
    keys++;
    const v = (m as Record<string, unknown>)[key];
    if (typeof v === 'string' || typeof v === 'boolean' || v === null) continue;
    if (typeof v !== 'number' || !Number.isFinite(v) || Object.is(v, -0)) return false;
  }
  // for…in saw the enumerable string keys: none hidden (non-enumerable, symbol) beside them, no getter.
  if (Object.getOwnPropertyNames(m).length !== keys || Object.getOwnPropertySymbols(m).length > 0) return false;
  for (const key in m) if (Object.getOwnPropertyDescriptor(m, key)?.get !== undefined) return false;
  return true;
}

/** A message to hold: itself when it is sealed as JSON, else its JSON text (checked: refused as a store refuses it). */
export function holdMessage(message: unknown, what: string): HeldMessage {
  return sealedAsJson(message) ? message : flat(R.encodeMessage(message, what));
}

/** How far back from its end a state's held messages are searched for a message to show (a turn adds a few). */
const SHOWN_SEARCH = 16;

/**
 * A message to show, held as the state's own sealed message when the state (held in the same
 * commit) ends with one equal to it — the input and the answer a turn saves to show are those of
 * its state — so the two are one object; else as {@link holdMessage} holds it.
 */
export function holdShown(message: unknown, what: string, state: HeldRecord | undefined): HeldMessage {
  const list = state?.messages;
  if (list !== undefined && typeof message === 'object' && message !== null) {
    for (let i = list.length - 1; i >= 0 && i >= list.length - SHOWN_SEARCH; i--) {
      const held = list[i];
      if (typeof held === 'object' && sameFlatRecord(held, message)) return held;
    }
  }
  return holdMessage(message, what);
}

// Same own keys in the same order, each holding the same primitive (`held` is sealed as JSON, so
// `m` then writes the same JSON and reads back as an equal object).
function sameFlatRecord(held: object, m: object): boolean {
  if (Object.getPrototypeOf(m) !== Object.prototype) return false;
  const a = Object.keys(held);
  const b = Object.keys(m);
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const key = a[i] as string;
    if (b[i] !== key || (held as Record<string, unknown>)[key] !== (m as Record<string, unknown>)[key]) return false;
  }
  return Object.getOwnPropertySymbols(m).length === 0 && Object.getOwnPropertyNames(m).length === b.length;
}

/** A held message read back: a copy the caller may change, as a store's read gives. */
export function copyMessage(held: HeldMessage): unknown {
  return typeof held === 'string' ? JSON.parse(held) : { ...held };
}

/**
 * A state envelope to hold: its messages split off as held messages when they can be (see
 * {@link PersistenceRules.encodeStateParts} for when), those of `heldBefore` (the held messages of
 * the envelope held before) that `value`'s list starts
 * with taken as they are (a turn checks and holds only the messages it added); else the whole
 * record as JSON. The same checks and errors as {@link PersistenceRules.encodeWithState}.
 *
 * An idle envelope (no question open, no message started: the fields of {@link HeldShell} and no
 * other) whose state is frozen, with every value in it, but its messages, a frozen plain record or
 * list of what JSON writes back as itself, cannot change either: the rest of it is held as an
 * object, not as JSON, its state as itself — with a frozen list of messages held as themselves,
 * that list too. The agent that saved it keeps the same state (a parent agent freezes what it
 * keeps between messages): an idle conversation is held once, by its agent and its store together.
 */
export function holdRecord(value: unknown, what: string, heldBefore?: readonly HeldMessage[]): NewHeldRecord {
  const list = splittable(value);
  if (list === undefined) return { shell: flat(R.encodeWithState(value, what)), messages: undefined, kept: 0 };
  try {
    const messages: HeldMessage[] = new Array(list.length);
    let kept = 0;
    if (heldBefore !== undefined) {
      // Held before and the very same object now: a sealed message, unchanged.
      for (const n = Math.min(heldBefore.length, list.length); kept < n && heldBefore[kept] === list[kept]; kept++) {
        messages[kept] = heldBefore[kept] as HeldMessage;
      }
    }
    let same = kept;
    for (let i = kept; i < list.length; i++) {
      const m = holdMessage(list[i], `${what}.state.messages[${i}]`);
      messages[i] = m;
      if (m === list[i]) same++;
    }
    // Every message held as itself, in a list that cannot change: that list.
    const heldList = same === list.length && Object.isFrozen(list) ? (list as readonly HeldMessage[]) : messages;
    const shell = heldShell(value as Record<string, unknown>);
    if (shell !== undefined) return { shell, messages: heldList, kept };
    const state = (value as { state: object }).state;
    const text = R.encode({ ...(value as object), state: { ...state, messages: list.length } }, what);
    return { shell: flat(text), messages: heldList, kept };
  } catch (error) {
    // Refused: encode() names the first value it finds in the whole record, as every store does.
    R.encode(value, what);
    throw error;
  }
}

/** The fields of an envelope a {@link HeldShell} holds (an envelope with any other is held as JSON). */
const SHELL_FIELDS: ReadonlySet<string> = new Set([
  'version',
  'agentId',
  'conversationId',
  'agentName',
  'status',
  'childCounter',
  'savedAt',
  'state',
]);

/** How deep a held state's values are followed (deeper: held as JSON, which refuses a cycle). */
const MAX_HELD_DEPTH = 64;

// The envelope held as an object, when it is an idle one whose state cannot change (see holdRecord).
function heldShell(e: Record<string, unknown>): HeldShell | undefined {
  for (const key in e) if (e[key] !== undefined && !SHELL_FIELDS.has(key)) return undefined;
  const { version, agentId, conversationId, agentName, status, childCounter, savedAt, state } = e;
  if (typeof agentId !== 'string' || typeof conversationId !== 'string') return undefined;
  for (const v of [version, agentName, status, childCounter, savedAt]) if (!asItself(v, 0, true)) return undefined;
  if (!frozenState(state)) return undefined;
  // The memory store keeps these fields in its rows of the agent (see ConversationTable), not this object.
  return { version, agentId, conversationId, agentName, status, childCounter, savedAt, state };
}

// A frozen plain state whose values but its messages (held apart) JSON writes back as themselves.
function frozenState(state: unknown): state is object {
  if (!frozenPlain(state)) return false;
  for (const key in state) {
    if (key !== 'messages' && !asItself((state as Record<string, unknown>)[key], 1, true)) return false;
  }
  return true;
}

// A frozen object of the plain prototype with enumerable string-keyed data properties only.
function frozenPlain(o: unknown): o is object {
  if (typeof o !== 'object' || o === null || !Object.isFrozen(o)) return false;
  const proto = Object.getPrototypeOf(o);
  if (proto !== Object.prototype && proto !== null) return false;
  let keys = 0;
  for (const key in o) {
    keys++;
    if (Object.getOwnPropertyDescriptor(o, key)?.get !== undefined) return false;
  }
  return Object.getOwnPropertyNames(o).length === keys && Object.getOwnPropertySymbols(o).length === 0;
}

/**
 * True when `v` cannot change and JSON writes it back as itself: a string, a boolean, null, a
 * finite number other than -0, or a frozen plain record or list of such values (`undefined` only
 * as a record's value: JSON drops it, as it drops the absent key it stands for).
 */
function asItself(v: unknown, depth: number, inRecord: boolean): boolean {
  switch (typeof v) {
    case 'string':
    case 'boolean':
      return true;
    case 'number':
      return Number.isFinite(v) && !Object.is(v, -0);
    case 'undefined':
      return inRecord;
    case 'object':
      break;
    default:
      return false;
  }
  if (v === null) return true;
  if (depth > MAX_HELD_DEPTH) return false;
  if (Array.isArray(v)) {
    if (!Object.isFrozen(v) || Object.getPrototypeOf(v) !== Array.prototype) return false;
    // Its indexes and `length`, nothing else (no hole, no named key, no symbol).
    if (Object.getOwnPropertyNames(v).length !== v.length + 1 || Object.getOwnPropertySymbols(v).length > 0)
      return false;
    for (let i = 0; i < v.length; i++) {
      if (Object.getOwnPropertyDescriptor(v, i)?.get !== undefined || !asItself(v[i], depth + 1, false)) return false;
    }
    return true;
  }
  if (!frozenPlain(v)) return false;
  for (const key in v) if (!asItself((v as Record<string, unknown>)[key], depth + 1, true)) return false;
  return true;
}

/** A held record read back: a copy, with the text messages of its state sealed as the loop seals them. */
export function readRecord(held: HeldRecord): unknown {
  const shell = held.shell;
  const messages = held.messages;
  const value =
    typeof shell === 'string'
      ? R.parseWithState(shell)
      : // What JSON would have held: a copy of the same values (those holding undefined left out).
        JSON.parse(JSON.stringify({ ...shell, state: { ...shell.state, messages: 0 } }));
  if (messages === undefined) return value;
  const parsed = messages.map((m) => (typeof m === 'string' ? (JSON.parse(m) as unknown) : m));
  sealParsedMessages(parsed);
  (value as { state: { messages: unknown } }).state.messages = parsed;
  return value;
}
