import { type Clock, isTroupeError, NO_USAGE, ToolTimeoutError, TroupeError, WorkerCrashedError } from '@troupe/core';
import { decodeSubagentResult, encodeSubagentTask, TaskFlag, TaskSlot } from '@troupe/core/internal';
import type { CancellationTable } from '../CancellationTable.js';
import type { Attempt } from '../RunTransport.js';
import type { LocalAttempt } from './LocalAttempt.js';
import { type ScopeWire, ScopeWires, scopeCopyFor } from './ScopeWires.js';
import { readResultOf, type ThreadInfo, WITHDRAWN, type WorkerPool } from './WorkerPool.js';
import type { WorkerEnd } from './workerEnd.js';

/** Options of {@link Dispatcher}. */
export interface DispatcherOptions {
  readonly pool: WorkerPool;
  readonly table: CancellationTable;
  readonly clock: Clock;
  /** Whether the transport was destroyed under its attempts. */
  readonly destroyed: () => boolean;
}

const EXIT_NOTE = /worker exited with code: (-?\d+)/;
const NO_EVENTS: readonly never[] = Object.freeze([]);

/**
 * Turns an attempt into a task tuple for the worker pool, fills it in when
 * piscina hands it to a thread, and reads the worker's answer (or its
 * thread's death) as a {@link WorkerEnd}. Keeps what a scope costs to cross:
 * a scope that cannot change is versioned, so each worker keeps its copy.
 */
export class Dispatcher {
  readonly #o: DispatcherOptions;
  readonly #scopes = new ScopeWires();

  constructor(options: DispatcherOptions) {
    this.#o = options;
  }

  /** The task tuple of an attempt (its slot, its thread's buffer and its time left are filled in at dispatch). */
  tuple(spec: Attempt, wire: ScopeWire): unknown[] {
    const ref = spec.agent;
    // Made only when one of them is set: most spawns carry none.
    let extras: Record<string, unknown> | null = null;
    if (spec.parentAgentId !== undefined) extras = { parentAgentId: spec.parentAgentId };
    const toolContext = spec.toolContext;
    for (const _ in toolContext) {
      extras ??= {};
      extras.toolContext = toolContext;
      break;
    }
    const work = spec.work;
    if (work.kind === 'start') {
      const metadata = work.metadata;
      if (metadata !== undefined) {
        for (const _ in metadata) {
          extras ??= {};
          extras.metadata = metadata;
          break;
        }
      }
    } else {
      const resume: Record<string, unknown> = { state: work.state, approvedCalls: [...work.approvedCalls] };
      if (work.answers.length > 0) resume.answers = work.answers;
      if (work.started !== undefined) resume.started = [...work.started];
      extras ??= {};
      extras.resume = resume;
    }
    const tuple = encodeSubagentTask({
      module: ref.module as string,
      agent: ref.name,
      agentId: spec.agentId,
      slot: 0,
      generation: 0,
      host: spec.features | (wire.serialized ? TaskFlag.serializedScope : 0),
      // A versioned scope's bytes are filled in at dispatch, as that thread's own copy.
      scope: wire.copies === undefined ? wire.scope : null,
      scopeVersion: wire.version === 0 ? undefined : wire.version,
      input: work.kind === 'start' ? work.input : undefined,
      capability: spec.capability,
    }) as unknown[];
    // The extras go in as one object the dispatch may still add the time left to.
    tuple[TaskSlot.extras] = extras;
    return tuple;
  }

  /** How `scope` crosses (versioned once per sealed scope). */
  wireOf(scope: unknown): ScopeWire {
    return this.#scopes.wireOf(scope);
  }

  /**
   * The dispatch moment (inside piscina's balancer: must not throw): the
   * attempt's slot in `thread`'s own buffer (in its current state: cancelled
   * if it already is), the buffer itself with the thread's first task, its
   * scope as that thread takes it, and the time it has left. False when no
   * slot could be had (the worker refuses a task without one).
   */
  bind(attempt: LocalAttempt, thread: ThreadInfo): boolean {
    const { table, clock } = this.#o;
    const task = attempt.tuple;
    const key = attempt.spec.runId;
    const wire = attempt.wire;
    // Nothing of this task is counted as kept until it is bound with a slot (the worker refuses one without).
    thread.sentScope = 0;
    if (wire.copies !== undefined) task[TaskSlot.scope] = scopeCopyFor(wire, thread);
    try {
      const handle = table.bind(key, thread.segment);
      task[TaskSlot.slot] = handle.index;
      task[TaskSlot.generation] = handle.generation;
    } catch {
      return false;
    }
    // A lean version the thread holds goes without its scope (the worker takes its own copy).
    // One it does not hold goes in full, and counts as kept once the thread answers this task (the
    // pool counts it then, before the thread is given its next task: see WorkerPool's guardTaskPort).
    if (wire.version !== 0 && !wire.serialized) {
      if (thread.keptScopes.has(wire.version)) {
        task[TaskSlot.scope] = null;
      } else {
        task[TaskSlot.scope] = wire.scope;
        thread.sentScope = wire.version;
      }
    }
    // Every task carries the thread's buffer until the worker has answered one that did: a
    // first task that could not be posted (or that the worker refused) must not leave the
    // thread without it.
    if (!thread.bufferSent) task[TaskSlot.buffer] = thread.segment.slots.buffer;
    const deadline = table.deadlineOf(key);
    if (deadline !== undefined) {
      let extras = task[TaskSlot.extras] as Record<string, unknown> | null;
      if (extras === null) {
        extras = {};
        task[TaskSlot.extras] = extras;
      }
      extras.timeoutMs = Math.max(0, deadline - clock.now());
    }
    return true;
  }

  /** The worker answered the attempt's task: its result, read (never throws). */
  fromResult(raw: unknown, attempt: LocalAttempt): WorkerEnd {
    // The worker answered a task that carried its buffer: it has it (see bind). (A lean scope
    // version it carried in full was counted as kept when the answer came in: see bind.)
    const thread = attempt.thread;
    if (attempt.tuple[TaskSlot.buffer] !== null && thread !== undefined) thread.bufferSent = true;
    try {
      const parsed = readResultOf(thread, raw) ?? decodeSubagentResult(raw);
      if (parsed.error !== undefined) return this.#malformed(attempt, parsed.error);
      return parsed.result;
    } catch (error) {
      // What a worker sends must never throw here (this is every run's way back: a throw
      // would leave the run hanging and reject unhandled), whatever it holds: a cause
      // chain deeper than the checks' stack, say.
      return this.#malformed(attempt, `it cannot be read: ${error instanceof Error ? error.message : String(error)}`);
    }
  }

  // A worker that answers with something that is not a result is broken (or
  // hostile): a defect, and the thread does not run anything else.
  #malformed(attempt: LocalAttempt, why: string): WorkerEnd {
    const thread = attempt.thread;
    if (thread !== undefined) this.#o.pool.recycle(thread, `it returned a malformed result (${why})`);
    return {
      end: {
        status: 'crashed',
        exitCode: null,
        error: new WorkerCrashedError(
          `the worker running ${attempt.spec.agentId} returned a malformed result (${why}); it was recycled`,
          null,
        ),
      },
      usage: NO_USAGE,
      sent: 0,
    };
  }

  /** The attempt's task was rejected: withdrawn, killed on purpose, its thread died, or it could not be posted. */
  fromRejection(error: unknown, attempt: LocalAttempt): WorkerEnd {
    const { table } = this.#o;
    const key = attempt.spec.runId;
    const kill = attempt.kill;
    // What the run spent before its thread died or was killed, as its worker noted it.
    const none = { usage: table.usageOf(key) ?? NO_USAGE, sent: 0 };
    if (error === WITHDRAWN) {
      // Cancelled while it waited for a thread: it never started.
      return { ...none, end: { status: 'cancelled', reason: table.reason(key) ?? 'user', forced: false } };
    }
    if (kill !== undefined) {
      if (kill.kind === 'lane-timeout') {
        const info = table.laneInfo(key, kill.lane);
        const tool = info === undefined ? undefined : (attempt.spec.agent.tools[info.tool]?.name ?? 'task');
        return {
          ...none,
          end: {
            status: 'failed',
            error: new ToolTimeoutError(tool ?? `a tool (call lane ${kill.lane})`, info?.timeoutMs ?? 0, true),
            events: NO_EVENTS,
            turns: 0,
          },
        };
      }
      return { ...none, end: { status: 'cancelled', reason: kill.reason, forced: true } };
    }
    const err = error instanceof Error ? error : new Error(String(error));
    if (this.#o.destroyed()) return { ...none, end: { status: 'cancelled', reason: 'shutdown', forced: true } };
    const thread = attempt.thread;
    const died =
      thread !== undefined &&
      (thread.exitCode !== undefined || thread.error !== undefined || thread.recycled !== undefined);
    if (!died) {
      // Nothing died: piscina could not post the task (a value that cannot be cloned, nesting too deep).
      return {
        ...none,
        end: {
          status: 'failed',
          error: new TroupeError(
            `the task of ${attempt.spec.agentId} could not be sent to a worker: ${err.message}; channels, answers and resume states must be plain data of reasonable depth`,
            { code: 'ERR_NOT_CLONEABLE', cause: err },
          ),
          events: NO_EVENTS,
          turns: 0,
        },
      };
    }
    const note = EXIT_NOTE.exec(err.message);
    const exitCode = thread.exitCode ?? (note !== null ? Number(note[1]) : null);
    const oom = isTroupeError(err) ? false : (err as { code?: unknown }).code === 'ERR_WORKER_OUT_OF_MEMORY';
    const what =
      thread.recycled !== undefined
        ? `was recycled: ${thread.recycled}`
        : oom
          ? 'ran out of memory (resourceLimits)'
          : exitCode !== null
            ? `exited with code ${exitCode}${thread.error !== undefined ? ` (${thread.error.message})` : ''}`
            : `died: ${(thread.error ?? err).message}`;
    return {
      ...none,
      end: {
        status: 'crashed',
        exitCode,
        error: new WorkerCrashedError(
          `the worker running ${attempt.spec.agentId} ${what}; the pool replaced it`,
          exitCode,
          { cause: thread.error ?? err },
        ),
      },
    };
  }
}
