import { createInterface } from 'node:readline/promises';
import type { Output } from './Output.js';
import { fig, paint, wrapText } from './wrapText.js';

/** What a person (or the demo on their behalf) answered. */
export interface Reply {
  readonly answer: string;
  /** True when a person typed it. */
  readonly typed: boolean;
  /** From the question to the answer. */
  readonly thinkingMs: number;
}

/** The person the demo asks, on stdin — or nobody, and the demo answers for them and says so. */
export class Person {
  readonly #out: Output;
  readonly #ask: boolean;
  readonly #autoReason: string;
  #asked = false;

  constructor(out: Output, options: { readonly ask: boolean; readonly autoReason: string | undefined }) {
    this.#out = out;
    this.#ask = options.ask;
    this.#autoReason = options.autoReason ?? 'automatic';
  }

  /** True when questions go to a person on the terminal. */
  get interactive(): boolean {
    return this.#ask;
  }

  /**
   * Ask `question`; an empty answer (or no person) is `auto`. `accept`
   * says whether a typed answer will do; it is asked again if not.
   */
  async ask(question: string, auto: string, accept: (answer: string) => boolean = () => true): Promise<Reply> {
    const out = this.#out;
    const s = out.style;
    const t0 = performance.now();
    await out.drain();
    out.commit();
    if (!this.#ask) {
      const why = this.#asked ? '' : ` (answered for you: ${this.#autoReason})`;
      this.#asked = true;
      out.print(...wrapText(`${question} ${fig(auto)}${why}`, out.width, `   ${s.yellow('?')} `, '     '));
      return { answer: auto, typed: false, thinkingMs: performance.now() - t0 };
    }
    const rl = createInterface({ input: process.stdin, output: process.stdout, terminal: true });
    // Ctrl-C (the terminal is raw while readline reads) and Ctrl-D (stdin ended) end the demo.
    const interrupted = new Promise<never>((_, reject) => {
      const stop = (why: string) => () => reject(Object.assign(new Error(why), { code: 'SIGINT' }));
      rl.once('SIGINT', stop('interrupted at a question'));
      rl.once('close', stop('stdin ended at a question'));
    });
    interrupted.catch(() => {});
    process.stdout.write('\x1b[?25h');
    try {
      const lines = wrapText(`${question} [${auto}]`, out.width - 1, `   ${s.yellow('?')} `, '     ');
      for (const line of lines.slice(0, -1)) process.stdout.write(`${paint(line, out.style)}\n`);
      for (;;) {
        const typed = (
          await Promise.race([rl.question(`${paint(lines.at(-1) ?? '', out.style)} `), interrupted])
        ).trim();
        const answer = typed === '' ? auto : typed;
        if (accept(answer)) return { answer, typed: typed !== '', thinkingMs: performance.now() - t0 };
      }
    } finally {
      rl.close();
      process.stdout.write('\x1b[?25l');
    }
  }
}
