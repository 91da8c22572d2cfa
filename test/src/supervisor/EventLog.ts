// Every event a supervisor emits, in order, with a sequence number: what the
// run-tree tests check their invariants against.
import type { Supervisor, SupervisorEvents } from '@troupe/supervisor';

/** Every event name of the supervisor's map. */
export const SUPERVISOR_EVENTS: readonly (keyof SupervisorEvents)[] = Object.freeze([
  'agent.started',
  'agent.turn',
  'agent.done',
  'agent.failed',
  'agent.cancelled',
  'agent.incomplete',
  'agent.restarted',
  'agent.stopped',
  'tool.execute.start',
  'tool.execute.stop',
  'tool.execute.exception',
  'tool.execute.timeout',
  'tool.approval.invalid',
  'model.start',
  'model.stop',
  'model.error',
  'model.delta',
  'subagent.spawned',
  'subagent.done',
  'subagent.failed',
  'subagent.crashed',
  'subagent.cancelled',
  'subagent.incomplete',
  'subagent.suspended',
  'request.opened',
  'request.answered',
  'request.withdrawn',
  'context.events_dropped',
  'context.operation_dropped',
  'host.refused',
  'worker.recycled',
] satisfies (keyof SupervisorEvents)[]);

/** One logged event: a supervisor event, or a note of the test's own (a reply, a `close` resolving). */
export interface Logged {
  readonly seq: number;
  readonly name: string;
  // biome-ignore lint/suspicious/noExplicitAny: payloads of every event name are read by field
  readonly payload: any;
}

/** Records every event of a supervisor from construction on. */
export class EventLog {
  readonly entries: Logged[] = [];
  readonly #waiters: { readonly match: (e: Logged) => boolean; readonly resolve: (e: Logged) => void }[] = [];
  readonly #listeners: ((e: Logged) => void)[] = [];

  constructor(supervisor: Supervisor) {
    for (const name of SUPERVISOR_EVENTS) {
      supervisor.on(name, ((payload: unknown) => this.note(name, payload)) as never);
    }
  }

  /** Append an entry (the tests note replies and lifecycle steps between the events). */
  note(name: string, payload: unknown): Logged {
    const entry: Logged = { seq: this.entries.length, name, payload };
    this.entries.push(entry);
    for (let i = this.#waiters.length - 1; i >= 0; i--) {
      const w = this.#waiters[i];
      if (w?.match(entry)) {
        this.#waiters.splice(i, 1);
        w.resolve(entry);
      }
    }
    for (const listener of this.#listeners) listener(entry);
    return entry;
  }

  /** Told about every entry from now on. */
  listen(listener: (e: Logged) => void): void {
    this.#listeners.push(listener);
  }

  /** The first entry matching, already logged or still to come. */
  when(match: (e: Logged) => boolean): Promise<Logged> {
    const seen = this.entries.find(match);
    if (seen !== undefined) return Promise.resolve(seen);
    return new Promise((resolve) => this.#waiters.push({ match, resolve }));
  }

  /** The first entry named `name` whose payload passes `match`, already logged or still to come. */
  whenNamed(name: string, match: (payload: Logged['payload']) => boolean = () => true): Promise<Logged> {
    return this.when((e) => e.name === name && match(e.payload));
  }

  /** Entries named `name`. */
  named(name: string): Logged[] {
    return this.entries.filter((e) => e.name === name);
  }

  /** The entries, one line each (for failure messages). */
  dump(from = 0): string {
    return this.entries
      .slice(from)
      .map((e) => `${e.seq} ${e.name} ${describe(e.payload)}`)
      .join('\n');
  }
}

function describe(payload: Logged['payload']): string {
  if (typeof payload !== 'object' || payload === null) return String(payload);
  const p = payload as Record<string, unknown>;
  const parts: string[] = [];
  for (const key of ['agentId', 'toolName', 'status', 'reason', 'requestId', 'forced', 'turn', 'resumed']) {
    if (p[key] !== undefined) parts.push(`${key}=${String(p[key])}`);
  }
  if (p.request !== undefined) parts.push(`request=${String((p.request as { id?: unknown }).id)}`);
  if (p.usage !== undefined) parts.push(`usage=${JSON.stringify(p.usage)}`);
  if (p.totalUsage !== undefined) parts.push(`total=${JSON.stringify(p.totalUsage)}`);
  return parts.join(' ');
}
