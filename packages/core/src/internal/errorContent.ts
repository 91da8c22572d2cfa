/** The content of a tool message that reports `error`: its message, and its code when it has one. */
export function errorContent(error: Error): { error: string; code?: string } {
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' ? { error: error.message, code } : { error: error.message };
}
