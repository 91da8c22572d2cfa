// Lines that fit the terminal: wrapped at spaces for prose, cut with an
// ellipsis for the live tree. Measured figures are marked in the text (see
// `fig`) and painted only after wrapping, so colour never counts as width.
import { ANSI_PATTERN, type Style } from './Style.js';

// Two private-use code points: no text the demo prints contains them.
const OPEN = '\uE000';
const CLOSE = '\uE001';
const MARKERS = /[\uE000\uE001]/g;
const FIGURE = /\uE000([^\uE001]*)\uE001/g;

/** Mark `text` as a measured figure: highlighted on a colour terminal, plain elsewhere. */
export function fig(text: string | number): string {
  return `${OPEN}${text}${CLOSE}`;
}

/** Columns `text` takes: one per code point, markers and escape sequences excluded. */
export function visibleLength(text: string): number {
  let n = 0;
  for (const _ of text.replace(ANSI_PATTERN, '').replace(MARKERS, '')) n++;
  return n;
}

/** Close a figure left open at the end of a line and reopen it on the next. */
function balance(lines: string[]): string[] {
  let open = false;
  return lines.map((line) => {
    const start = open ? OPEN : '';
    for (const ch of line) {
      if (ch === OPEN) open = true;
      else if (ch === CLOSE) open = false;
    }
    return `${start}${line}${open ? CLOSE : ''}`;
  });
}

/**
 * Word-wrap `text` to `width` columns. The first line starts with `first`,
 * the following ones with `rest` (a hanging indent). A word longer than a
 * line is cut.
 */
export function wrapText(text: string, width: number, first = '', rest = first): string[] {
  const lines: string[] = [];
  let line = first;
  let used = visibleLength(first);
  let empty = true;
  const breakLine = (): void => {
    lines.push(line);
    line = rest;
    used = visibleLength(rest);
    empty = true;
  };
  for (const word of text.split(' ')) {
    let w = word;
    let len = visibleLength(w);
    if (len === 0) continue;
    if (!empty && used + 1 + len > width) breakLine();
    // A word wider than a whole line: cut it where the line ends.
    while (empty && used + len > width) {
      const [head, tail] = splitVisible(w, Math.max(1, width - used));
      line += head;
      breakLine();
      w = tail;
      len = visibleLength(w);
    }
    if (len === 0) continue;
    line += (empty ? '' : ' ') + w;
    used += (empty ? 0 : 1) + len;
    empty = false;
  }
  if (!empty || lines.length === 0) lines.push(line);
  return balance(lines);
}

/** The first `columns` visible code points of `text` (escape sequences and markers kept, uncounted), and the rest. */
function splitVisible(text: string, columns: number): [string, string] {
  let n = 0;
  let i = 0;
  while (i < text.length) {
    if (text[i] === '\x1b' && text[i + 1] === '[') {
      const end = text.slice(i).search(/[A-Za-z]/);
      i += end < 0 ? text.length - i : end + 1;
      continue;
    }
    const ch = text[i] as string;
    if (ch !== OPEN && ch !== CLOSE) {
      if (n === columns) break;
      n++;
    }
    i += (text.codePointAt(i) ?? 0) > 0xffff ? 2 : 1;
  }
  return [text.slice(0, i), text.slice(i)];
}

/** `text` on one line of at most `width` columns, cut with `…` when longer. */
export function fitText(text: string, width: number): string {
  if (visibleLength(text) <= width) return text;
  const head = splitVisible(text, Math.max(0, width - 1))[0];
  // A colour cut in the middle must not run on into the next line.
  const reset = head.includes('\x1b[') ? '\x1b[0m' : '';
  return balance([`${head}${reset}…`])[0] as string;
}

/** `text` without its figure markers. */
export function unmarked(text: string): string {
  return text.replace(MARKERS, '');
}

/** Replace the figure markers by colour (or by nothing). */
export function paint(line: string, style: Style): string {
  if (!style.color) return line.replace(MARKERS, '');
  return line.replace(FIGURE, (_, inner: string) => style.bold(style.cyan(inner)));
}
