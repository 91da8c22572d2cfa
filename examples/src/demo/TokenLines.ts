import { wrapText } from './wrapText.js';

/**
 * Streamed text cut into lines as it arrives: `push` returns the lines that
 * are complete (wrapped at `width`, or ended by a newline); `partial` is the
 * line still being written. `end` returns what is left.
 */
export class TokenLines {
  readonly #width: number;
  readonly #indent: string;
  #buffer = '';

  constructor(width: number, indent: string) {
    this.#width = width;
    this.#indent = indent;
  }

  push(text: string): string[] {
    // One space between words; a newline ends a paragraph.
    this.#buffer = (this.#buffer + text).replace(/[^\S\n]+/g, ' ');
    const done: string[] = [];
    for (let nl = this.#buffer.indexOf('\n'); nl >= 0; nl = this.#buffer.indexOf('\n')) {
      const paragraph = this.#buffer.slice(0, nl);
      if (paragraph.trim() !== '') done.push(...this.#wrap(paragraph));
      this.#buffer = this.#buffer.slice(nl + 1);
    }
    // Lines the wrap has filled: all but the last, which may still grow.
    const lines = this.#wrap(this.#buffer);
    if (lines.length > 1) {
      done.push(...lines.slice(0, -1));
      // The last line's words are the buffer's last words (one space between each).
      const last = (lines.at(-1) ?? '').slice(this.#indent.length);
      this.#buffer = `${last}${this.#buffer.endsWith(' ') ? ' ' : ''}`;
    }
    return done;
  }

  /** The line being written (indented), or '' if none. */
  get partial(): string {
    return this.#buffer.trim() === '' ? '' : (this.#wrap(this.#buffer).at(-1) ?? '');
  }

  end(): string[] {
    const rest = this.#buffer.trim() === '' ? [] : this.#wrap(this.#buffer);
    this.#buffer = '';
    return rest;
  }

  #wrap(text: string): string[] {
    return wrapText(text.trim(), this.#width, this.#indent);
  }
}
