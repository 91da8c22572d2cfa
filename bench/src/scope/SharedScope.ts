// Stretch prototype (issue 6 §6), kept in bench/ until the figures say it pays:
// a shared, immutable scope. The scope is encoded once into a
// SharedArrayBuffer (each top-level key serialized on its own); a hop carries
// only a handle (a 32-byte view of the header: structured clone shares the
// memory of a typed array over a SharedArrayBuffer instead of copying it); a
// tool decodes the one key it reads on first access, and each thread caches
// decoded keys by the scope's version.
import { randomInt } from 'node:crypto';
import { deserialize, serialize } from 'node:v8';
import { freezeReceived } from '@troupe/core/internal';

const MAGIC = 0x5c09e5;
const HEADER_INTS = 8;
const HEADER_BYTES = HEADER_INTS * 4;
// Header words.
const H_MAGIC = 0;
const H_NONCE = 1;
const H_SERIAL = 2;
const H_INDEX_OFFSET = 3;
const H_INDEX_LENGTH = 4;

/** What crosses a thread in place of the scope: a header view over the shared encoding. */
export interface SharedScopeHandle {
  readonly sharedScope: Int32Array;
}

// One nonce per process and a serial per encoding: (nonce, serial) names a
// version across threads (each postMessage gives the receiver a new
// SharedArrayBuffer object for the same memory, so identity cannot).
const nonce = randomInt(1, 2 ** 31 - 1);
let serial = 0;

/**
 * Encode a plain-object scope once into shared memory. Each top-level key is
 * serialized apart so a reader decodes only what it reads. Costs one
 * serialization of the whole scope (about a third of a structuredClone) and
 * one copy into the buffer.
 */
export function encodeSharedScope(scope: Readonly<Record<string, unknown>>): SharedScopeHandle {
  const parts: [string, Buffer][] = Object.keys(scope).map((key) => [key, serialize(scope[key])]);
  let offset = HEADER_BYTES;
  const index: [string, number, number][] = [];
  for (const [key, bytes] of parts) {
    index.push([key, offset, bytes.byteLength]);
    offset += bytes.byteLength;
  }
  const indexBytes = serialize(index);
  const total = offset + indexBytes.byteLength;
  const buffer = new SharedArrayBuffer(total);
  const bytes = new Uint8Array(buffer);
  parts.forEach(([, part], i) => {
    bytes.set(part, (index[i] as [string, number, number])[1]);
  });
  bytes.set(indexBytes, offset);
  const header = new Int32Array(buffer, 0, HEADER_INTS);
  header[H_MAGIC] = MAGIC;
  header[H_NONCE] = nonce;
  header[H_SERIAL] = ++serial;
  header[H_INDEX_OFFSET] = offset;
  header[H_INDEX_LENGTH] = indexBytes.byteLength;
  return Object.freeze({ sharedScope: header });
}

interface Decoded {
  readonly index: ReadonlyMap<string, readonly [number, number]>;
  readonly values: Map<string, unknown>;
}

// Per-thread cache: version → decoded keys. Bounded, oldest version dropped first.
const MAX_VERSIONS = 16;
const cache = new Map<string, Decoded>();

function versionOf(header: Int32Array): string {
  if (header[H_MAGIC] !== MAGIC) throw new TypeError('not a shared scope handle');
  return `${header[H_NONCE]}:${header[H_SERIAL]}`;
}

/** Bytes of the shared encoding (header, keys and index): what it occupies once, in shared memory. */
export function sharedScopeBytes(handle: SharedScopeHandle): number {
  return handle.sharedScope.buffer.byteLength;
}

/**
 * Read one top-level key of a shared scope: decoded on this thread's first
 * access to it, deep-frozen, then served from the thread's cache for as long
 * as the version stays cached.
 */
export function readSharedKey(handle: SharedScopeHandle, key: string): unknown {
  const header = handle.sharedScope;
  const version = versionOf(header);
  let decoded = cache.get(version);
  if (decoded === undefined) {
    const buffer = header.buffer;
    const raw = deserialize(
      new Uint8Array(buffer, header[H_INDEX_OFFSET] as number, header[H_INDEX_LENGTH] as number),
    ) as [string, number, number][];
    decoded = { index: new Map(raw.map(([k, offset, length]) => [k, [offset, length] as const])), values: new Map() };
    cache.set(version, decoded);
    if (cache.size > MAX_VERSIONS) cache.delete(cache.keys().next().value as string);
  }
  if (decoded.values.has(key)) return decoded.values.get(key);
  const where = decoded.index.get(key);
  const value =
    where === undefined ? undefined : freezeReceived(deserialize(new Uint8Array(header.buffer, where[0], where[1])));
  decoded.values.set(key, value);
  return value;
}
