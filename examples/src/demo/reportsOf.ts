import type { TaskReport } from '../agents/coordinator.js';
import { DemoFailure } from './Narrator.js';

const cut = (text: string): string => (text.length > 120 ? `${text.slice(0, 119)}…` : text);

/**
 * The coordinator's answer: one report per delegated line (none unless it is
 * done). An answer that is not the JSON array of reports its instructions ask
 * for (a real model that answered in its own words) is a {@link DemoFailure}
 * saying so, with what it answered.
 */
export function reportsOf(reply: { readonly status: string; readonly text?: string }): TaskReport[] {
  if (reply.status !== 'done' || reply.text === undefined) return [];
  let reports: unknown;
  try {
    reports = JSON.parse(reply.text);
  } catch {
    reports = undefined;
  }
  const isReport = (r: unknown): boolean =>
    typeof r === 'object' &&
    r !== null &&
    (typeof (r as { ok?: unknown }).ok === 'string' || typeof (r as { error?: unknown }).error === 'object');
  if (!Array.isArray(reports) || !reports.every(isReport)) {
    throw new DemoFailure(
      `the delegating agent's answer is not the JSON array of its tasks' results ([{ "ok": ... } | { "error": ... }]) that its instructions ask for: it answered ${JSON.stringify(cut(reply.text))}`,
    );
  }
  return reports as TaskReport[];
}
