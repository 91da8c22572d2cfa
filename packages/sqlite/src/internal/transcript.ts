// Lists of messages in chunks: an agent's transcript (the messages saved for display) and a saved
// state's messages. One row holds several messages, one JSON text per line, so that a saved
// message rewrites its agent's last row in place instead of adding a row and an entry to an index
// over every conversation (an insert into a full page of it rebalanced the page with its siblings).
import { PersistenceRules as R } from '@troupe/supervisor';
import { MESSAGE_CHUNK_BYTES, type Statement } from './statements.js';

/** A chunk as a store reads it (`getMessages`, `getStateMessages`). */
export interface ChunkRow {
  readonly chunk: number;
  readonly count: number;
  readonly json: unknown;
}

/** The two statements that write one list's chunks: into the last chunk while it fits, or the next. */
export interface ChunkWriters {
  readonly append: Statement;
  readonly add: Statement;
}

/**
 * Append `texts` (each one message's JSON, from `JSON.stringify`: no raw newline) to an agent's
 * list, inside the caller's transaction, in groups of at most {@link MESSAGE_CHUNK_BYTES} (a
 * longer message alone): the first group into its last chunk when the whole group fits there (else
 * a new chunk, leaving that one as it is), every later group in a new chunk.
 */
export function appendChunks(
  w: ChunkWriters,
  tenant: string,
  conversation: string,
  agent: string,
  texts: readonly string[],
): void {
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
    const row = { tenant, conversation, agent, count: j - i, text };
    if (i > 0 || w.append.run(row).changes !== 1) w.add.run(row);
    i = j;
  }
}

/** The JSON texts of a list's chunks, in order ({@link R.readChunks}: shared by every store that chunks). */
export const readChunks = R.readChunks;

/** The messages of an agent's transcript from its chunks, in order; a damaged chunk is `ERR_STORE_CORRUPT`. */
export function readTranscript(rows: readonly ChunkRow[], agent: string, file: string): unknown[] {
  const where = (n: number) => `message ${n} of ${agent} in ${file}`;
  return readChunks(rows, 'the transcript', where).map((line, i) => R.readRecord(line, 'message', where(i + 1)));
}
