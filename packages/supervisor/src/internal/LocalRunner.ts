import type { ApprovalHandler, CancelReason, Clock, LoopState, ModelDelta, Request, Usage } from '@troupe/core';
import {
  endOfLoop,
  type LoopEventSink,
  type LoopOutcome,
  type ResumeAnswer,
  runAgentLoop,
  slotRunCancellation,
  type TaskSpawner,
  type TurnCheckpoints,
} from '@troupe/core/internal';
import { CancellationTable } from '../CancellationTable.js';
import type { RunEnd } from '../RunTransport.js';
import type { RunNode } from './RunNode.js';

/** What one run of a loop on this thread is given. */
export interface LocalRun {
  readonly input: string | undefined;
  readonly state: LoopState;
  /** The answers it resumes with (see the loop's `answers`). */
  readonly answers?: readonly ResumeAnswer[] | undefined;
  readonly approvedCalls?: readonly string[] | undefined;
  readonly interrupted?:
    | { readonly started: ReadonlySet<string>; readonly lost?: ReadonlyMap<string, Usage> | undefined }
    | undefined;
  readonly approval: ApprovalHandler | undefined;
  readonly spawner: TaskSpawner | undefined;
  readonly events: LoopEventSink | undefined;
  readonly onQuestion: (toolCallId: string, request: Request) => void;
  readonly onDelta: ((delta: ModelDelta) => void) | undefined;
  readonly checkpoints: TurnCheckpoints | undefined;
  /** A tool's `ctx.cancel()`: the tree records it and stops the run's subtree. */
  readonly onCancel: (reason: CancelReason) => void;
}

/** How a loop on this thread ended. */
export interface LocalEnd {
  readonly end: RunEnd;
  readonly usage: Usage;
  readonly state: LoopState;
}

/**
 * Runs parent agents' loops on this thread (the supervisor's), beside the
 * transport that runs subagents elsewhere: each run gets a slot in this
 * thread's own cancellation buffer, so its tools see a cancel with one load,
 * as a worker's do. A cancel is written here by the tree; a deadline is the
 * tree's to enforce (the slot only tells the tools).
 */
export class LocalRunner {
  readonly #table: CancellationTable;
  readonly #clock: Clock;

  constructor(clock: Clock, capacity?: number) {
    this.#clock = clock;
    this.#table = new CancellationTable({ clock, ...(capacity === undefined ? {} : { capacity }) });
  }

  /** Slots in use. */
  get size(): number {
    return this.#table.size;
  }

  /** This thread's cancellation slots. */
  get table(): CancellationTable {
    return this.#table;
  }

  /** Run `node`'s loop here; resolves with how it ended (never rejects for the loop's own failures). */
  async run(node: RunNode, run: LocalRun): Promise<LocalEnd> {
    const table = this.#table;
    const key = node.id;
    table.register(key, node.deadline === undefined ? {} : { deadline: node.deadline });
    if (node.cancelled !== undefined) table.cancel(key, node.cancelled);
    const handle = table.handle(key);
    const cancellation = slotRunCancellation(table.slots, handle as NonNullable<typeof handle>, {
      deadline: node.deadline ?? null,
      clock: this.#clock,
      onCancel: run.onCancel,
    });
    let outcome: LoopOutcome;
    try {
      outcome = await runAgentLoop({
        agent: node.agent,
        run: { scope: node.scope, toolContext: node.toolContext, agentId: node.agentId, parentAgentId: undefined },
        state: run.state,
        input: run.input,
        answers: run.answers,
        approvedCalls: run.approvedCalls === undefined ? undefined : new Set(run.approvedCalls),
        clock: this.#clock,
        cancellation,
        approval: run.approval,
        spawner: run.spawner,
        events: run.events,
        onQuestion: run.onQuestion,
        onDelta: run.onDelta,
        checkpoints: run.checkpoints,
        interrupted: run.interrupted,
      });
    } finally {
      cancellation.close();
      table.release(key);
    }
    return { end: endOfLoop(outcome), usage: outcome.state.usage, state: outcome.state };
  }

  /** Cancel `node`'s loop here, if it runs (its tools see it at once). */
  cancel(node: RunNode, reason: CancelReason): void {
    this.#table.cancel(node.id, reason);
  }

  /** Wake every waiter on this thread's slots (at shutdown: nothing is left to wait for). */
  close(): void {
    this.#table.slots.wakeWatchers();
  }
}
