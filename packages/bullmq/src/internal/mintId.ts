import { randomBytes } from 'node:crypto';

/** `length` random characters of base64url (6 bits each, from the OS CSPRNG): ids and nonces. */
export function mintId(length: number): string {
  return randomBytes(Math.ceil((length * 3) / 4))
    .toString('base64url')
    .slice(0, length);
}
