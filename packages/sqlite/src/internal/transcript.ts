// A conversation's transcript (the messages saved for display) in chunks: one row holds several
// messages, one JSON text per line, so that a saved message rewrites its agent's last row in
// place — one page — instead of adding a row and an entry to an index over every conversation.
import { PersistenceRules as R } from '@troupe/supervisor';
import { MESSAGE_CHUNK_BYTES, type Statements } from './statements.js';

/** A chunk as `getMessages` reads it. */
export interface ChunkRow {
  readonly chunk: number;
  readonly count: number;
  readonly json: unknown;
}

/**
 * Append `texts` (each one message's JSON, from `JSON.stringify`: no raw newline) to an agent's
 * transcript, inside the caller's transaction, in groups of at most {@link MESSAGE_CHUNK_BYTES} (a
 * longer message alone): the first group into its last chunk when the whole group fits there (else
 * a new chunk, leaving that one as it is), every later group in a new chunk.
 */
export function appendTranscript(
  s: Statements,
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
    if (i > 0 || s.appendMessages.run(row).changes !== 1) s.addMessages.run(row);
    i = j;
  }
}

/** The messages of an agent's transcript from its chunks, in order; a damaged chunk is `ERR_STORE_CORRUPT`. */
export function readTranscript(rows: readonly ChunkRow[], agent: string, file: string): unknown[] {
  const out: unknown[] = [];
  for (const [i, row] of rows.entries()) {
    if (row.chunk !== i + 1) {
      throw R.corrupt(
        `message ${out.length + 1} of ${agent} in ${file}`,
        new Error(`the transcript's chunk ${i + 1} is missing (the next is ${String(row.chunk)})`),
      );
    }
    const lines = typeof row.json === 'string' ? row.json.split('\n') : undefined;
    if (lines === undefined || !(row.count >= 1) || lines.length !== row.count + 1 || lines[row.count] !== '') {
      const held = lines === undefined ? 'no text' : `${lines.length - 1} complete lines`;
      throw R.corrupt(
        `message ${out.length + 1} of ${agent} in ${file}`,
        new Error(`chunk ${row.chunk} of the transcript says it holds ${row.count} messages, and holds ${held}`),
      );
    }
    for (let k = 0; k < row.count; k++) {
      out.push(R.readRecord(lines[k], 'message', `message ${out.length + 1} of ${agent} in ${file}`));
    }
  }
  return out;
}
