import { readFileSync } from 'node:fs';

/**
 * When a process started, as Linux reports it (`/proc/<pid>/stat` field 22,
 * clock ticks since boot), or `''` where there is no `/proc`. Together with
 * the pid it names one process: a reused pid has another start time.
 */
export function processStart(pid: number): string {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    // The command name (field 2) may hold spaces and parentheses: count from the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return fields[19] ?? '';
  } catch {
    return '';
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
  return start === '' || processStart(pid) === start;
}
