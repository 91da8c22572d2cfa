import type { Message } from '@troupe/core';

/**
 * A subagent's or a tool's text as a reader wants it: a JSON string or a
 * JSON array of strings (what the demo's subagents answer) as its words, not
 * as JSON inside JSON; anything else as it is.
 */
function plain(text: string): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return text;
  }
  if (typeof parsed === 'string') return parsed;
  if (Array.isArray(parsed) && parsed.length > 0 && parsed.every((v) => typeof v === 'string')) {
    return parsed.join('; ');
  }
  return text;
}

/**
 * A coordinator's answer — the JSON array of its tasks' reports — read out:
 * each task's text (`ok`), or its error's message and code; any other text as it is.
 */
export function readableReply(text: string): string {
  let reports: unknown;
  try {
    reports = JSON.parse(text);
  } catch {
    return text;
  }
  if (!Array.isArray(reports) || reports.length === 0) return plain(text);
  const parts: string[] = [];
  for (const r of reports) {
    if (typeof r === 'object' && r !== null && typeof (r as { ok?: unknown }).ok === 'string') {
      parts.push(plain((r as { ok: string }).ok));
    } else if (typeof r === 'object' && r !== null && typeof (r as { error?: unknown }).error === 'object') {
      const e = (r as { error: { error?: unknown; code?: unknown } }).error;
      parts.push(`error: ${String(e?.error ?? '?')}${typeof e?.code === 'string' ? ` (${e.code})` : ''}`);
    } else {
      return plain(text);
    }
  }
  return parts.join(' | ');
}

/** One line of a saved transcript (`undefined`: not shown), its agent named `who`. */
export function transcriptLine(m: Message, who: string): string | undefined {
  const name = who.padEnd(5);
  switch (m.role) {
    case 'system':
      return undefined;
    case 'user':
      return `you   ${m.content.replace(/\s+/g, ' ')}`;
    case 'assistant':
      if (m.toolCalls !== undefined && m.toolCalls.length > 0) {
        const calls = m.toolCalls.map((c) => {
          const a = c.arguments as { subagent?: string; instructions?: string };
          return c.name === 'task' ? `task(${a.subagent}, "${a.instructions}")` : c.name;
        });
        return `${name} → ${calls.join(', ')}`;
      }
      return `${name} ${readableReply(m.content).replace(/\s+/g, ' ')}`;
    case 'tool':
      return `tool  ${plain(typeof m.content === 'string' ? m.content : JSON.stringify(m.content)).replace(/\s+/g, ' ')}`;
  }
}
