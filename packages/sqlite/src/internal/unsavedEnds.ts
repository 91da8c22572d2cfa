// Runs whose end a store of this thread was asked to save and could not (the write failed: a full
// disk, a read-only file), by the store's owner id. Their rows still say `running` under a store
// that is open, yet nothing runs them: the writer stopped when it asked for the end.
// `markInterrupted` (of any store of this thread) marks them as it marks a dead process's runs,
// and a deletion is not held up by them. A later write of the run that succeeds takes it off (the
// row then says what that write says).
import type { RunRecord } from '@troupe/supervisor';

/** A run whose end was not saved: its tenant, id and the attempt. */
export interface UnsavedEnd {
  readonly owner: string;
  readonly tenant: string;
  readonly runId: string;
  readonly attempt: number;
}

const byOwner = new Map<string, Map<string, UnsavedEnd>>();

function runKey(tenant: string, runId: string): string {
  return `${tenant}\u0000${runId}`;
}

/** The runs `owner`'s failed write was ending: no longer run by their writer. */
export function noteUnsaved(owner: string, tenant: string, ended: readonly RunRecord[]): void {
  if (ended.length === 0) return;
  let mine = byOwner.get(owner);
  if (mine === undefined) {
    mine = new Map();
    byOwner.set(owner, mine);
  }
  for (const run of ended)
    mine.set(runKey(tenant, run.runId), { owner, tenant, runId: run.runId, attempt: run.attempt });
}

/** Runs `owner` saved: off the list, whatever an earlier end of theirs left (one map lookup when it is empty). */
export function noteSaved(owner: string, tenant: string, runs: readonly RunRecord[] | undefined): void {
  if (runs === undefined || byOwner.size === 0) return;
  const mine = byOwner.get(owner);
  if (mine === undefined) return;
  for (const run of runs) mine.delete(runKey(tenant, run.runId));
  if (mine.size === 0) byOwner.delete(owner);
}

/** Whether the running row of `runId` (of `owner`, at `attempt`) is one whose end a store of this thread failed to save. */
export function isUnsaved(owner: string, tenant: string, runId: string, attempt: number): boolean {
  return byOwner.get(owner)?.get(runKey(tenant, runId))?.attempt === attempt;
}

/** Every unsaved end of `tenant` (all tenants: `null`). */
export function unsavedOf(tenant: string | null): UnsavedEnd[] {
  const out: UnsavedEnd[] = [];
  for (const ends of byOwner.values()) {
    for (const end of ends.values()) if (tenant === null || end.tenant === tenant) out.push(end);
  }
  return out;
}

/** Take these ends off the list, unless a later failed write replaced one since. */
export function settle(ends: readonly UnsavedEnd[]): void {
  for (const end of ends) {
    const mine = byOwner.get(end.owner);
    const key = runKey(end.tenant, end.runId);
    if (mine?.get(key) !== end) continue;
    mine.delete(key);
    if (mine.size === 0) byOwner.delete(end.owner);
  }
}

/** A closed store's runs are a closed store's: `markInterrupted` marks every one left running. */
export function forgetOwner(owner: string): void {
  byOwner.delete(owner);
}
