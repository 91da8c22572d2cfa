import { readFileSync } from 'node:fs';

/**
 * When a process started, as Linux reports it (`/proc/<pid>/stat` field 22,
 * clock ticks since boot), or `''` where there is no `/proc`. Together with
 * the pid it names one process: a reused pid has another start time.
 */
export function processStart(pid: number): string {
  return statFields(pid)?.[19] ?? '';
}

// The fields of `/proc/<pid>/stat` after the command name (field 3 onwards), or undefined.
function statFields(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    // The command name (field 2) may hold spaces and parentheses: count from the last ')'.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

/** True while the process `pid` that started at `start` (from {@link processStart}) runs. */
export function processAlive(pid: number, start: string): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    // EPERM: it exists but belongs to someone else.
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  if (start === '') return true;
  const fields = statFields(pid);
  // A zombie (killed, not yet reaped by its parent) runs nothing.
  return fields !== undefined && fields[0] !== 'Z' && fields[19] === start;
}
