import type { Output } from './Output.js';
import { fig, unmarked, wrapText } from './wrapText.js';

/** A claim the demo printed did not hold. */
export class DemoFailure extends Error {
  override readonly name = 'DemoFailure';
}

/** One headline figure, for the summary at the end. */
export interface Figure {
  readonly label: string;
  readonly value: string;
  readonly note: string;
}

/**
 * Prints the demo's narrative. Every `✓` line is a checked claim: `check`
 * prints it only when it holds and throws a {@link DemoFailure} otherwise, so
 * the demo cannot show something that did not happen. Lines are wrapped to
 * the output's width with a hanging indent.
 */
export class Narrator {
  #checks = 0;
  readonly #out: Output;
  readonly figures: Figure[] = [];

  constructor(out: Output) {
    this.#out = out;
  }

  /** How many claims held so far. */
  get checks(): number {
    return this.#checks;
  }

  scene(title: string): void {
    const s = this.#out.style;
    this.#out.print('', ...wrapText(title, this.#out.width).map((l) => s.bold(s.magenta(l))));
  }

  /** A measurement or an explanation (not a claim). */
  say(text: string): void {
    this.#out.print(...wrapText(text, this.#out.width, '   ', '   '));
  }

  /** A side remark, dimmed. */
  note(text: string): void {
    const s = this.#out.style;
    this.#out.print(...wrapText(text, this.#out.width, '   ', '   ').map((l) => s.dim(l)));
  }

  /** Print `claim` if `holds`, else fail the demo with `detail`. */
  check(holds: boolean, claim: string, detail?: unknown): asserts holds {
    if (!holds) {
      throw new DemoFailure(
        `${unmarked(claim)}${detail === undefined ? '' : ` — got ${typeof detail === 'string' ? detail : safeJson(detail)}`}`,
      );
    }
    this.#checks++;
    this.#out.print(...wrapText(claim, this.#out.width, `   ${this.#out.style.green('✓')} `, '     '));
  }

  /** Keep a headline figure for the summary. */
  record(label: string, value: string, note: string): void {
    this.figures.push({ label, value, note });
  }

  /** The headline figures, one line each (the label, the figure, what it is). */
  summary(): void {
    const pad = Math.max(...this.figures.map((f) => f.label.length));
    const value = Math.max(...this.figures.map((f) => f.value.length));
    const indent = ' '.repeat(3 + pad + 2 + value + 2);
    for (const f of this.figures) {
      const head = `   ${f.label.padEnd(pad)}  ${fig(f.value.padEnd(value))}  `;
      this.#out.print(...wrapText(f.note, this.#out.width, head, indent));
    }
  }
}

function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value, (_k, v) => (v instanceof Error ? { name: v.name, message: v.message } : v));
  } catch {
    return String(value);
  }
}

/** `1.2 µs`, `3.4 ms`, `1.20 s`: the unit a reader expects at that magnitude. */
export function formatDuration(ms: number): string {
  if (ms < 1) return `${(ms * 1000).toFixed(1)} µs`;
  if (ms < 1000) return `${ms.toFixed(ms < 10 ? 1 : 0)} ms`;
  return `${(ms / 1000).toFixed(2)} s`;
}

/** `97 B`, `17.3 KiB`. */
export function formatBytes(bytes: number): string {
  return bytes < 1024 ? `${bytes} B` : `${(bytes / 1024).toFixed(1)} KiB`;
}
