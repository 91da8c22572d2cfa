import type { WriteStream } from 'node:tty';
import type { Output } from './Output.js';
import { createStyle, type Style } from './Style.js';
import { fitText, paint } from './wrapText.js';

/** How often the live region is redrawn, and a queued line printed. */
const TICK_MS = 55;

/**
 * A terminal: printed lines scroll up one per tick (a reader can follow
 * them), and below them a live region — the agents' tree — is redrawn in
 * place: the cursor goes back up over the last frame, erases to the end of
 * the screen and writes the next one, in one write. Frame lines are cut to
 * the width so none wraps (a wrapped line would break the count of lines
 * to go back over). The cursor is hidden while it runs; `close()` shows it.
 */
export class LiveOutput implements Output {
  readonly live = true;
  readonly style: Style;
  readonly #tty: WriteStream;
  readonly #queue: string[] = [];
  readonly #drained: (() => void)[] = [];
  #render: (() => readonly string[]) | undefined;
  #height = 0;
  #timer: ReturnType<typeof setInterval> | undefined;
  #closed = false;

  constructor(tty: WriteStream, options: { readonly color: boolean }) {
    this.#tty = tty;
    this.style = createStyle(options.color);
    tty.write('\x1b[?25l');
    this.#timer = setInterval(() => this.#tick(), TICK_MS);
  }

  get width(): number {
    return Math.max(20, Math.min(80, this.#tty.columns || 80));
  }

  print(...lines: readonly string[]): void {
    if (!this.#closed) this.#queue.push(...lines);
  }

  follow(render: (() => readonly string[]) | undefined): void {
    if (this.#closed) return;
    this.#render = render;
    this.#draw([]);
  }

  commit(): void {
    if (this.#closed) return;
    // Everything queued goes first, then the frame, for good.
    const frame = this.#frame();
    this.#render = undefined;
    this.#draw([...this.#queue.splice(0), ...frame]);
    this.#settle();
  }

  drain(): Promise<void> {
    if (this.#queue.length === 0 || this.#closed) return Promise.resolve();
    return new Promise((resolve) => this.#drained.push(resolve));
  }

  pause(ms: number): Promise<void> {
    return new Promise((resolve) => setTimeout(resolve, ms));
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#timer);
    this.#timer = undefined;
    this.#draw(this.#queue.splice(0), false);
    this.#tty.write('\x1b[?25h');
    this.#settle();
  }

  #tick(): void {
    const next = this.#queue.shift();
    this.#draw(next === undefined ? [] : [next]);
    if (this.#queue.length === 0) this.#settle();
  }

  #settle(): void {
    for (const resolve of this.#drained.splice(0)) resolve();
  }

  #frame(): string[] {
    const render = this.#render;
    if (render === undefined) return [];
    // One column spare: a line that fills the last column leaves some terminals waiting to wrap.
    const width = this.width - 1;
    const rows = Math.max(4, (this.#tty.rows || 24) - 2);
    const lines = render().map((line) => fitText(line, width));
    return lines.length <= rows ? lines : [...lines.slice(0, rows - 1), `… ${lines.length - rows + 1} more`];
  }

  /** Go back over the frame, print `printed` for good, then draw the frame again below them. */
  #draw(printed: readonly string[], withFrame = true): void {
    const frame = withFrame ? this.#frame() : [];
    let out = this.#height > 0 ? `\x1b[${this.#height}A\r\x1b[J` : '';
    for (const line of printed) out += `${paint(line, this.style)}\n`;
    for (const line of frame) out += `${paint(line, this.style)}\n`;
    this.#height = frame.length;
    if (out.length > 0) this.#tty.write(out);
  }
}
