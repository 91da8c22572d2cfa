import type { ModelDelta } from '@troupe/core';

/** A string cut to `max` characters (an ellipsis marks the cut). */
export function truncate(text: string, max: number): string {
  if (text.length <= max) return text;
  // Never half a character: a cut between a surrogate pair's halves leaves a lone surrogate, which
  // an exporter writes as U+FFFD (or refuses).
  const last = text.charCodeAt(max - 1);
  const end = last >= 0xd800 && last <= 0xdbff ? max - 1 : max;
  return `${text.slice(0, end)}…`;
}

/**
 * Tool calls of one model call whose content is kept; the model's later
 * calls are not captured. A model streams a handful of parallel calls; a
 * stream that opens a new index with every delta must not grow the
 * supervisor's heap with it.
 */
export const MAX_CAPTURED_TOOL_CALLS = 128;

/**
 * The key {@link ContentCapture.toolArguments} gives the call whose id is
 * `toolCallId`: the id cut as the capture keeps it.
 */
export function captureKey(toolCallId: string, max: number): string {
  return appendBounded('', toolCallId, max);
}

/** `held` with as much of `more` appended as keeps it at most `max + 1` characters (the extra one marks a cut). */
function appendBounded(held: string, more: string, max: number): string {
  const room = max + 1 - held.length;
  if (room <= 0) return held;
  return held + (more.length <= room ? more : more.slice(0, room));
}

/**
 * The content of one model call, read from its streamed deltas (only when
 * the integrator turned content on): the answer text and each tool call's
 * arguments. Bounded whatever the model streams: every string it keeps
 * (text, arguments, call ids) holds at most `maxLength + 1` characters, and
 * at most {@link MAX_CAPTURED_TOOL_CALLS} calls are kept.
 */
export class ContentCapture {
  readonly #max: number;
  #text = '';
  readonly #calls = new Map<number, { id: string | undefined; args: string }>();

  constructor(maxLength: number) {
    this.#max = maxLength;
  }

  add(deltas: readonly ModelDelta[]): void {
    for (const d of deltas) {
      if (d.type === 'text') {
        if (typeof d.text === 'string') this.#text = appendBounded(this.#text, d.text, this.#max);
      } else if (d.type === 'tool_call') {
        let call = this.#calls.get(d.index);
        if (call === undefined) {
          if (this.#calls.size >= MAX_CAPTURED_TOOL_CALLS) continue;
          call = { id: undefined, args: '' };
          this.#calls.set(d.index, call);
        }
        // The id is kept cut too: it keys the arguments to the call's span (see toolArguments).
        if (typeof d.id === 'string') call.id = captureKey(d.id, this.#max);
        if (typeof d.arguments === 'string') call.args = appendBounded(call.args, d.arguments, this.#max);
      }
      // Reasoning text is never recorded.
    }
  }

  /** `gen_ai.output.messages` as a JSON string, or undefined when nothing streamed. */
  outputMessages(finishReason: string | undefined): string | undefined {
    if (this.#text.length === 0) return undefined;
    return JSON.stringify([
      {
        role: 'assistant',
        parts: [{ type: 'text', content: truncate(this.#text, this.#max) }],
        ...(finishReason === undefined ? {} : { finish_reason: finishReason }),
      },
    ]);
  }

  /**
   * The arguments each streamed tool call was given, truncated, keyed by
   * {@link captureKey} of its id. Two calls whose ids share
   * their first `maxLength + 1` characters cannot be told apart: neither
   * is given arguments rather than the wrong ones.
   */
  toolArguments(): Map<string, string> {
    const out = new Map<string, string>();
    const ambiguous = new Set<string>();
    for (const call of this.#calls.values()) {
      if (call.id === undefined || call.args.length === 0) continue;
      if (out.has(call.id)) ambiguous.add(call.id);
      out.set(call.id, truncate(call.args, this.#max));
    }
    for (const key of ambiguous) out.delete(key);
    return out;
  }
}
