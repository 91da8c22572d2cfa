import type { Output } from './Output.js';
import { createStyle } from './Style.js';
import { fitText, paint } from './wrapText.js';

/**
 * Plain lines for a pipe, a log or CI: no escape sequence, no cursor
 * movement, no pause. A followed frame is printed once, at `commit()`.
 */
export class PlainOutput implements Output {
  readonly live = false;
  readonly width: number;
  readonly style = createStyle(false);
  readonly #write: (text: string) => void;
  #render: (() => readonly string[]) | undefined;
  #closed = false;

  constructor(write: (text: string) => void, width = 80) {
    this.#write = write;
    this.width = width;
  }

  print(...lines: readonly string[]): void {
    if (this.#closed) return;
    for (const line of lines) this.#write(`${paint(line, this.style)}\n`);
  }

  follow(render: (() => readonly string[]) | undefined): void {
    this.#render = render;
  }

  commit(): void {
    const render = this.#render;
    this.#render = undefined;
    if (render !== undefined) this.print(...render().map((line) => fitText(line, this.width)));
  }

  drain(): Promise<void> {
    return Promise.resolve();
  }

  pause(): Promise<void> {
    return Promise.resolve();
  }

  close(): void {
    this.#closed = true;
  }
}
