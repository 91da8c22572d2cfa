// Lists of messages in chunks, as the SQLite store keeps them: an agent's transcript and a saved
// state's messages. One row holds several messages, one JSON text per line (JSON.stringify never
// writes a raw newline), so that a saved message rewrites its agent's last row instead of adding one.
import { MESSAGE_CHUNK_BYTES } from './statements.js';

/** Runs one statement of the store inside the caller's transaction; resolves to its row count. */
export type RunStatement = (
  name: 'appendMessages' | 'addMessages' | 'appendStateMessages' | 'addStateMessages',
  values: unknown[],
) => Promise<number>;

/**
 * Append `texts` (each one message's JSON) to an agent's list, inside the caller's transaction, in
 * groups of at most {@link MESSAGE_CHUNK_BYTES} (a longer message alone): the first group into its
 * last chunk when the whole group fits there (else a new chunk), every later group in a new chunk.
 */
export async function appendChunks(
  run: RunStatement,
  list: 'transcript' | 'state',
  tenant: string,
  conversation: string,
  agent: string,
  texts: readonly string[],
): Promise<void> {
  const append = list === 'transcript' ? 'appendMessages' : 'appendStateMessages';
  const add = list === 'transcript' ? 'addMessages' : 'addStateMessages';
  let i = 0;
  while (i < texts.length) {
    let bytes = Buffer.byteLength(texts[i] as string) + 1;
    let j = i + 1;
    for (; j < texts.length; j++) {
      const next = Buffer.byteLength(texts[j] as string) + 1;
      if (bytes + next > MESSAGE_CHUNK_BYTES) break;
      bytes += next;
    }
    let text = '';
    for (let k = i; k < j; k++) text += `${texts[k]}\n`;
    const values = [tenant, conversation, agent, text, j - i];
    if (i > 0 || (await run(append, values)) !== 1) await run(add, values);
    i = j;
  }
}
