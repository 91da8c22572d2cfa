import type { Message } from '@troupe/core';

/** The text of the latest user message: what a scripted model reads as its task. */
export function lastUserMessage(messages: readonly Message[]): string {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (m?.role === 'user') return m.content;
  }
  return '';
}
