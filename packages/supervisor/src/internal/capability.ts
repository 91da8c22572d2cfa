import { randomFillSync } from 'node:crypto';
import { CAPABILITY_LENGTH } from '@troupe/core/internal';

/**
 * Capabilities: 18 bytes from the OS CSPRNG (144 bits) as 24 base64url
 * characters. The bytes are drawn for 227 capabilities at a time and
 * encoded at once (18 bytes are 24 characters exactly, so the encoding of
 * the pool is the encodings of its 18-byte groups end to end); each
 * capability is a slice of that string (V8 makes a slice of 13 characters or
 * more without copying). A per-character alphabet lookup (nanoid's
 * customAlphabet) built 24 strings per run; an encoding per run is a native
 * call per run.
 */
const CAPABILITIES_PER_DRAW = 227;
const capabilityBytes = Buffer.allocUnsafe((CAPABILITY_LENGTH * 3 * CAPABILITIES_PER_DRAW) / 4);
let capabilityDraw = '';
let capabilityNext = CAPABILITIES_PER_DRAW;

/** A fresh capability (≥ 128 random bits): the authority of one attempt's host calls. */
export function mintCapability(): string {
  if (capabilityNext === CAPABILITIES_PER_DRAW) {
    randomFillSync(capabilityBytes);
    capabilityDraw = capabilityBytes.toString('base64url');
    capabilityNext = 0;
  }
  const start = capabilityNext++ * CAPABILITY_LENGTH;
  return capabilityDraw.slice(start, start + CAPABILITY_LENGTH);
}
