import { isDeepFrozen, serializedSize } from '@troupe/core';
import { serializedBytes, serializedSizeAtMost } from '@troupe/core/internal';
import type { ThreadInfo } from './WorkerPool.js';

/** A scope as it crosses (see {@link ScopeWires.wireOf}). */
export interface ScopeWire {
  /**
   * The scope, or its serialized bytes over a SharedArrayBuffer. A versioned
   * scope's bytes never cross themselves: each thread gets its own copy of
   * them (see `copies`).
   */
  readonly scope: unknown;
  /** 0: not versioned (the scope can still change). */
  readonly version: number;
  readonly serialized: boolean;
  /**
   * A versioned serialized scope's bytes, one copy per thread it was sent
   * to. Any thread can write any byte of a SharedArrayBuffer it holds: were
   * one buffer posted to every thread, a tool could rewrite the scope
   * another thread's run decodes next (another tenant, another role). With
   * a copy each, what a thread rewrites reaches that thread only (whose
   * realm its code owns anyway).
   */
  readonly copies: WeakMap<ThreadInfo, Uint8Array> | undefined;
}

export const NO_SCOPE: ScopeWire = Object.freeze({
  scope: undefined,
  version: 0,
  serialized: false,
  copies: undefined,
});

/** From this serialized size a scope crosses as shared bytes (see {@link ScopeWires.wireOf}). */
const SERIALIZED_SCOPE_MIN_BYTES = 8 * 1024;

/** `thread`'s own copy of a versioned scope's bytes, made the first time the scope goes there. */
export function scopeCopyFor(wire: ScopeWire, thread: ThreadInfo): Uint8Array {
  const copies = wire.copies as WeakMap<ThreadInfo, Uint8Array>;
  const known = copies.get(thread);
  if (known !== undefined) return known;
  const own = sharedCopy(wire.scope as Uint8Array);
  copies.set(thread, own);
  return own;
}

/** `bytes` copied into a SharedArrayBuffer: posting it copies nothing. */
function sharedCopy(bytes: Uint8Array): Uint8Array {
  const shared = new Uint8Array(new SharedArrayBuffer(bytes.byteLength));
  shared.set(bytes);
  return shared;
}

/**
 * What a scope costs to cross to a worker thread, paid once per scope: each
 * sealed scope's wire form, versioned, so a worker keeps its copy of it.
 */
export class ScopeWires {
  readonly #scopeWires = new WeakMap<object, ScopeWire>();
  #scopeVersions = 0;

  /**
   * How a sealed scope crosses. A heavy one as bytes: serialized once per
   * scope, into a SharedArrayBuffer per thread it goes to (posting it copies
   * nothing; one buffer for all threads would let one rewrite what the others
   * decode) — structured clone would serialize the whole graph on this
   * thread on every hop. A lean one (the norm) as it is. A scope that can never change (`isDeepFrozen`)
   * gets a version, and its wire form is kept: a worker decodes or freezes
   * each version once and reuses it. One that can (it holds anything but
   * plain objects, arrays and primitives: a Map, a Date...) is looked at
   * afresh on every spawn and never versioned.
   */
  wireOf(scope: unknown): ScopeWire {
    if (scope === undefined) return NO_SCOPE;
    if (typeof scope !== 'object' || scope === null) return { scope, version: 0, serialized: false, copies: undefined };
    const known = this.#scopeWires.get(scope);
    if (known !== undefined) return known;
    if (!isDeepFrozen(scope)) {
      // It can change: what it holds now, serialized once (its size is never remembered).
      const encoded = serializedBytes(scope);
      return encoded.byteLength < SERIALIZED_SCOPE_MIN_BYTES
        ? { scope, version: 0, serialized: false, copies: undefined }
        : { scope: sharedCopy(encoded), version: 0, serialized: true, copies: undefined };
    }
    // A bound under the threshold settles it without serializing a lean scope;
    // a heavy one was measured when sealed, and the bytes made then are used.
    const wire: ScopeWire =
      serializedSizeAtMost(scope) < SERIALIZED_SCOPE_MIN_BYTES || serializedSize(scope) < SERIALIZED_SCOPE_MIN_BYTES
        ? { scope, version: ++this.#scopeVersions, serialized: false, copies: undefined }
        : // Kept here, never posted: each thread gets a copy (see ScopeWire.copies).
          { scope: serializedBytes(scope), version: ++this.#scopeVersions, serialized: true, copies: new WeakMap() };
    this.#scopeWires.set(scope, wire);
    return wire;
  }
}
