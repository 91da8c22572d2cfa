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
 * The content of one model call, read from its streamed deltas (only when
 * the integrator turned content on): the answer text and each tool call's
 * arguments, each kept to `maxLength` characters while it accumulates.
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
        if (this.#text.length <= this.#max) this.#text += d.text;
      } else if (d.type === 'tool_call') {
        let call = this.#calls.get(d.index);
        if (call === undefined) {
          call = { id: undefined, args: '' };
          this.#calls.set(d.index, call);
        }
        if (d.id !== undefined) call.id = d.id;
        if (d.arguments !== undefined && call.args.length <= this.#max) call.args += d.arguments;
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

  /** The arguments each streamed tool call was given, by call id, truncated. */
  toolArguments(): Iterable<[string, string]> {
    const out: [string, string][] = [];
    for (const call of this.#calls.values()) {
      if (call.id !== undefined && call.args.length > 0) out.push([call.id, truncate(call.args, this.#max)]);
    }
    return out;
  }
}
