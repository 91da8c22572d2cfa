// Colours of the demo's output. With colour off every function returns its
// text unchanged, so plain mode carries no escape sequence at all.

/** A way to paint text: ANSI SGR colours, or nothing. */
export interface Style {
  readonly color: boolean;
  readonly bold: (text: string) => string;
  readonly dim: (text: string) => string;
  readonly green: (text: string) => string;
  readonly red: (text: string) => string;
  readonly yellow: (text: string) => string;
  readonly cyan: (text: string) => string;
  readonly magenta: (text: string) => string;
}

const sgr =
  (on: number, off: number) =>
  (text: string): string =>
    `\x1b[${on}m${text}\x1b[${off}m`;
const same = (text: string): string => text;

/** Colours when `color`, else the identity everywhere. */
export function createStyle(color: boolean): Style {
  if (!color) {
    return { color, bold: same, dim: same, green: same, red: same, yellow: same, cyan: same, magenta: same };
  }
  return {
    color,
    bold: sgr(1, 22),
    dim: sgr(2, 22),
    green: sgr(32, 39),
    red: sgr(31, 39),
    yellow: sgr(33, 39),
    cyan: sgr(36, 39),
    magenta: sgr(35, 39),
  };
}

/** Every ANSI escape sequence the demo writes (SGR colours, cursor moves, erases). */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching escape sequences is the point.
export const ANSI_PATTERN = /\x1b\[[0-9;?]*[A-Za-z]/g;
