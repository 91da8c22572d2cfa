// The run tree's invariants, checked over an event log (see EventLog): every
// run ends once; nothing of a run is emitted after its outcome; a run ends
// after its whole subtree; a terminal reply comes after its tree ended; a
// run's total usage is its own plus its children's totals; its own usage is
// what its model calls reported.
import type { Usage } from '@troupe/core';
import type { Logged } from './EventLog.js';

/** The events that end a run (a subagent run, a direct spawn, a parent agent's message). */
export const TERMINAL_EVENTS: ReadonlySet<string> = new Set([
  'subagent.done',
  'subagent.failed',
  'subagent.crashed',
  'subagent.cancelled',
  'subagent.incomplete',
  'agent.done',
  'agent.failed',
  'agent.cancelled',
  'agent.incomplete',
]);

/** A run as the log shows it. */
export interface LoggedRun {
  readonly runId: string;
  readonly agentId: string;
  /** The agent ids from the root down to this run, as its events give them. */
  path: readonly string[] | undefined;
  parentAgentId: string | undefined;
  /** The run of the parent agent that was live when this one was spawned. */
  parent: LoggedRun | undefined;
  readonly children: LoggedRun[];
  /** Its first entry. */
  readonly first: Logged;
  spawned: Logged | undefined;
  readonly terminals: Logged[];
  /** Σ of the usage its model.stop events reported. */
  modelUsage: Usage;
}

const ZERO: Usage = { inputTokens: 0, outputTokens: 0 };

function add(a: Usage, b: Usage | undefined): Usage {
  if (b === undefined) return a;
  return { inputTokens: a.inputTokens + b.inputTokens, outputTokens: a.outputTokens + b.outputTokens };
}

function same(a: Usage | undefined, b: Usage | undefined): boolean {
  return a?.inputTokens === b?.inputTokens && a?.outputTokens === b?.outputTokens;
}

// The agent whose run an entry belongs to (request.opened names the root agent, its path the asker).
function agentOf(e: Logged): string | undefined {
  const p = e.payload as { path?: unknown; agentId?: unknown };
  if (Array.isArray(p.path) && p.path.length > 0) return String(p.path[p.path.length - 1]);
  return e.name === 'request.answered' ? undefined : typeof p.agentId === 'string' ? p.agentId : undefined;
}

/** The runs of a log, by run id. */
export function runsOf(entries: readonly Logged[]): Map<string, LoggedRun> {
  const runs = new Map<string, LoggedRun>();
  for (const e of entries) {
    const runId = (e.payload as { runId?: unknown } | null)?.runId;
    if (typeof runId !== 'string') continue;
    let run = runs.get(runId);
    if (run === undefined) {
      const agentId = agentOf(e);
      if (agentId === undefined) continue;
      run = {
        runId,
        agentId,
        path: undefined,
        parentAgentId: undefined,
        parent: undefined,
        children: [],
        first: e,
        spawned: undefined,
        terminals: [],
        modelUsage: ZERO,
      };
      runs.set(runId, run);
    }
    const p = e.payload as { path?: readonly string[]; parentAgentId?: string; usage?: Usage };
    if (run.path === undefined && Array.isArray(p.path)) run.path = p.path;
    if (e.name === 'subagent.spawned' && run.spawned === undefined) {
      run.spawned = e;
      run.parentAgentId = p.parentAgentId;
    }
    if (e.name === 'model.stop') run.modelUsage = add(run.modelUsage, p.usage);
    if (TERMINAL_EVENTS.has(e.name)) run.terminals.push(e);
  }
  for (const run of runs.values()) {
    const parentAgentId = run.parentAgentId;
    const at = run.spawned?.seq;
    if (parentAgentId === undefined || at === undefined) continue;
    // The parent agent's run that was live when this one was spawned (a parent agent has one run per message).
    let parent: LoggedRun | undefined;
    for (const candidate of runs.values()) {
      if (candidate.agentId !== parentAgentId || candidate.first.seq > at) continue;
      if (parent === undefined || candidate.first.seq > parent.first.seq) parent = candidate;
    }
    run.parent = parent;
    parent?.children.push(run);
  }
  return runs;
}

/** Options of {@link checkRunTree}. */
export interface CheckRunTreeOptions {
  /** Every run must have ended (after `close()`), except those `unfinished` accepts. */
  readonly final?: boolean;
  readonly unfinished?: (run: LoggedRun) => boolean;
}

function isForced(e: Logged): boolean {
  const p = e.payload as { forced?: unknown; error?: { forced?: unknown } };
  return e.name === 'subagent.crashed' || p.forced === true || p.error?.forced === true;
}

/** The invariants the log breaks, one message each (empty: none). */
export function checkRunTree(entries: readonly Logged[], options: CheckRunTreeOptions = {}): string[] {
  const problems: string[] = [];
  const runs = runsOf(entries);
  const name = (run: LoggedRun) => `${run.agentId} (${run.runId})`;
  const requestRun = new Map<string, LoggedRun>();
  for (const e of entries) {
    if (e.name !== 'request.opened') continue;
    const run = runs.get(String(e.payload.runId));
    if (run !== undefined) requestRun.set(String(e.payload.request.id), run);
  }
  for (const run of runs.values()) {
    const [terminal, ...more] = run.terminals;
    if (more.length > 0) {
      problems.push(`${name(run)} ended ${run.terminals.length} times: ${run.terminals.map((t) => t.name).join(', ')}`);
    }
    if (terminal === undefined) {
      if (options.final === true && options.unfinished?.(run) !== true) problems.push(`${name(run)} never ended`);
      continue;
    }
    for (const e of entries) {
      if (e.seq <= terminal.seq) continue;
      const of =
        (e.payload as { runId?: unknown } | null)?.runId === run.runId
          ? true
          : e.name === 'request.withdrawn' && requestRun.get(String(e.payload.requestId)) === run;
      if (of)
        problems.push(`${name(run)}: ${e.name} (#${e.seq}) after its outcome ${terminal.name} (#${terminal.seq})`);
    }
    let children = ZERO;
    let complete = true;
    for (const child of run.children) {
      const end = child.terminals[0];
      if (end === undefined || end.seq > terminal.seq) {
        problems.push(
          `${name(run)} ended (#${terminal.seq}) before its child ${name(child)}${end === undefined ? ' ended' : ` (#${end.seq})`}`,
        );
        complete = false;
        continue;
      }
      if (child.spawned !== undefined && child.spawned.seq > terminal.seq) {
        problems.push(`${name(child)} was spawned (#${child.spawned.seq}) after its parent ended (#${terminal.seq})`);
      }
      const total = (end.payload as { totalUsage?: Usage }).totalUsage;
      if (total === undefined) complete = false;
      else children = add(children, total);
    }
    const p = terminal.payload as { usage?: Usage; totalUsage?: Usage };
    if (p.usage === undefined || p.totalUsage === undefined) {
      if (terminal.name !== 'agent.failed') problems.push(`${name(run)}: ${terminal.name} carries no usage`);
      continue;
    }
    if (complete && !same(p.totalUsage, add(p.usage, children))) {
      problems.push(
        `${name(run)}: totalUsage ${JSON.stringify(p.totalUsage)} is not its usage ${JSON.stringify(p.usage)} + its children's totals ${JSON.stringify(children)}`,
      );
    }
    if (!isForced(terminal) && !same(p.usage, run.modelUsage)) {
      problems.push(
        `${name(run)}: usage ${JSON.stringify(p.usage)} is not what its model calls reported (${JSON.stringify(run.modelUsage)})`,
      );
    }
  }
  // A reply that is not `suspended` comes after every run of its tree that started before it ended.
  for (const e of entries) {
    if (e.name !== 'reply' || e.payload.status === 'suspended') continue;
    const root = String(e.payload.agentId);
    for (const run of runs.values()) {
      if (run.path?.[0] !== root || run.first.seq > e.seq) continue;
      const end = run.terminals[0];
      if (end === undefined || end.seq > e.seq) {
        problems.push(
          `the ${e.payload.status} reply of ${root} (#${e.seq}) came before ${name(run)} ended${end === undefined ? '' : ` (#${end.seq})`}`,
        );
      }
    }
  }
  return problems;
}
