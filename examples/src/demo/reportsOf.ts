import type { TaskReport } from '../agents/coordinator.js';

/** The coordinator's answer: one report per delegated line (none unless it is done). */
export function reportsOf(reply: { readonly status: string; readonly text?: string }): TaskReport[] {
  return reply.status === 'done' && reply.text !== undefined ? (JSON.parse(reply.text) as TaskReport[]) : [];
}
