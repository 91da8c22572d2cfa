import { PersistenceRules as R, sealParsedMessages, splittable } from './PersistenceRules.js';

// How the memory store holds a value without a second copy of what cannot change. The store's
// rule is that of every store: what it keeps is a copy, so nothing the caller does afterwards
// reaches it. A message the agent loop sealed (a frozen plain record of strings, finite numbers,
// booleans and nulls) cannot change and reads back from JSON as an equal object: holding it is
// holding its JSON, for nothing. Everything else is held as JSON text, flat.

/** A message as the store holds it: the sealed message itself, or its JSON text. */
export type HeldMessage = object | string;

/** A state envelope or run record as the store holds it. */
export interface HeldRecord {
  /** The record as JSON, with `state.messages` written as their number when `messages` is set. */
  readonly shell: string;
  /** The state's messages, when they were split off the record. */
  readonly messages: readonly HeldMessage[] | undefined;
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
 * A state envelope or run record to hold: its messages split off as held messages when they can
 * be (see {@link PersistenceRules.encodeStateParts} for when), those of `before` that `value`'s
 * list starts with taken as they are (a turn checks and holds only the messages it added); else
 * the whole record as JSON. The same checks and errors as {@link PersistenceRules.encodeWithState}.
 */
export function holdRecord(value: unknown, what: string, before?: HeldRecord): HeldRecord {
  const list = splittable(value);
  if (list === undefined) return { shell: flat(R.encodeWithState(value, what)), messages: undefined };
  try {
    const kept = before?.messages;
    const messages: HeldMessage[] = new Array(list.length);
    let i = 0;
    if (kept !== undefined) {
      // Held before and the very same object now: a sealed message, unchanged.
      for (const n = Math.min(kept.length, list.length); i < n && kept[i] === list[i]; i++) {
        messages[i] = kept[i] as HeldMessage;
      }
    }
    for (; i < list.length; i++) messages[i] = holdMessage(list[i], `${what}.state.messages[${i}]`);
    const state = (value as { state: object }).state;
    const shell = R.encode({ ...(value as object), state: { ...state, messages: list.length } }, what);
    return { shell: flat(shell), messages };
  } catch (error) {
    // Refused: encode() names the first value it finds in the whole record, as every store does.
    R.encode(value, what);
    throw error;
  }
}

/** A held record read back: a copy, with the text messages of its state sealed as the loop seals them. */
export function readRecord(held: HeldRecord): unknown {
  const value = R.parseWithState(held.shell);
  const messages = held.messages;
  if (messages === undefined) return value;
  const parsed = messages.map((m) => (typeof m === 'string' ? (JSON.parse(m) as unknown) : m));
  sealParsedMessages(parsed);
  (value as { state: { messages: unknown } }).state.messages = parsed;
  return value;
}
