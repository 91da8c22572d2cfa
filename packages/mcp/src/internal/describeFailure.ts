import type { ResolvedMcpServerOptions } from '../McpServerOptions.js';

/** A URL as a message shows it: no credentials, no query (where some servers take tokens). */
export function shownURL(url: string): string {
  try {
    const u = new URL(url);
    return `${u.origin}${u.pathname}`;
  } catch {
    return 'its URL';
  }
}

/** The most telling code in an error's cause chain (`ENOENT`, `ECONNREFUSED`, ...). */
export function errorCode(error: unknown): string | undefined {
  let e: unknown = error;
  for (let depth = 0; depth < 6 && typeof e === 'object' && e !== null; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && code !== '') return code;
    // An AggregateError (a host with several addresses, each refused) keeps its codes in `errors`.
    const inner = (e as { errors?: unknown }).errors;
    if (Array.isArray(inner)) {
      for (const sub of inner) {
        const subCode = errorCode(sub);
        if (subCode !== undefined) return subCode;
      }
    }
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

const oneLine = (s: string): string => s.replace(/\s+/g, ' ').trim();

/** The server as a message names it: `"files" (node server.js)`, `"tickets" at http://...`. */
export function serverLabel(o: ResolvedMcpServerOptions): string {
  return o.transport === 'stdio'
    ? `the MCP server "${o.name}" (${[o.command, ...o.args].join(' ')})`
    : `the MCP server "${o.name}" at ${shownURL(o.url)}`;
}

/** One line saying why connecting failed, and what to check. */
export function describeFailure(
  phase: 'connect',
  o: ResolvedMcpServerOptions,
  error: unknown,
  stderrTail: string,
): string {
  const code = errorCode(error);
  const said = oneLine(error instanceof Error ? error.message : String(error));
  const stderr = stderrTail === '' ? '' : `; its stderr said: ${stderrTail.slice(0, 500)}`;
  if (o.transport === 'stdio') {
    if (code === 'ENOENT') {
      return `cannot start ${serverLabel(o)}: the command "${o.command}" was not found (ENOENT): check command and PATH`;
    }
    if (code === 'EACCES') return `cannot start ${serverLabel(o)}: "${o.command}" is not executable (EACCES)`;
    return `${serverLabel(o)} did not complete the MCP handshake (${phase}: ${said})${stderr}: check that the command starts an MCP server on stdio`;
  }
  if (code !== undefined && /^E[A-Z]+$/.test(code)) {
    return `cannot reach ${serverLabel(o)} (${code}): check url and that the server is running`;
  }
  return `${serverLabel(o)} did not complete the MCP handshake (${said}): check url (the server's MCP endpoint) and headers`;
}
