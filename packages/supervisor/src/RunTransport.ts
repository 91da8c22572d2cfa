import type {
  Agent,
  AgentId,
  Answer,
  CancelReason,
  Clock,
  LoopEnd,
  LoopState,
  Metadata,
  RunId,
  Scope,
  Usage,
  WorkerCrashedError,
} from '@troupe/core';
import type {
  HostApprovalRequest,
  HostCheckpoint,
  HostEvent,
  HostTaskRequest,
  HostTaskResult,
} from '@troupe/core/internal';
import type { SupervisorEvents } from './SupervisorEvents.js';

/**
 * How one attempt of a run ended, on the supervisor's side of whatever ran it:
 * one shape for every transport and every kind of run.
 *
 * - `done`, `failed`, `incomplete`: the run's loop returned (an answer; a
 *   failure the model or a tool reported; the turn limit);
 * - `cancelled`: it stopped on a cancel (`forced`: it ignored it and was killed);
 * - `suspended`: its loop stopped on open calls (questions, deferred children);
 *   `state` resumes it, on any transport;
 * - `crashed`: whatever ran it died under it (a thread's exit, out of memory,
 *   a malformed result): a defect, never a failure;
 * - `lost`: whatever ran it vanished and nobody can say how it ended (a worker
 *   host killed, its lease lapsed): the tree may run it again as a new attempt
 *   from its last checkpoint. A transport on one machine never reports it.
 *
 * The first five are a loop's own end, in one shape whichever thread ran it
 * (a worker's result is read off its wire straight into it).
 *
 * @example
 * ```ts
 * function describe(end: RunEnd): string {
 *   return end.status === 'cancelled' ? `cancelled (${end.reason})` : end.status
 * }
 * ```
 */
export type RunEnd =
  | LoopEnd
  | { readonly status: 'crashed'; readonly error: WorkerCrashedError; readonly exitCode: number | null }
  | { readonly status: 'lost'; readonly error: Error };

/** What an attempt's end carries besides how it ended. *
 * @example
 * ```ts
 * const end: AttemptEnd = { end: { status: 'cancelled', reason: 'user', forced: false }, usage: { inputTokens: 0, outputTokens: 0 } }
 * ```
 */
export interface AttemptEnd {
  readonly end: RunEnd;
  /** Tokens its own model calls spent (what its worker noted, when it died). */
  readonly usage: Usage;
}

/** Where an attempt runs, once a slot took it (for events and `worker.recycled`). *
 * @example
 * ```ts
 * const placement: AttemptPlacement = { threadId: 3, at: Date.now() }
 * ```
 */
export interface AttemptPlacement {
  /** The worker thread's id on the host that runs it. */
  readonly threadId: number;
  /** The host that runs it (`undefined`: this process). */
  readonly host?: string | undefined;
  /** When the slot took it (clock ms): the end of its queue wait. */
  readonly at: number;
}

/** What an attempt does: start a run's first attempt, or resume a suspended one. *
 * @example
 * ```ts
 * const work: AttemptWork = { kind: 'start', input: 'Summarise the incident', metadata: undefined }
 * ```
 */
export type AttemptWork =
  | { readonly kind: 'start'; readonly input: string | undefined; readonly metadata: Metadata | undefined }
  | {
      readonly kind: 'resume';
      readonly state: LoopState;
      /**
       * The answers to its own questions it resumes with (none when the tree resolved its open
       * calls itself): each answered call re-runs once, all in this attempt. `expired`: the answer
       * came after its request's `expiresAt` (the call gets an error result).
       */
      readonly answers: readonly { readonly answer: Answer; readonly expired: boolean }[];
      /** Tool calls a person approved (they run without asking again). */
      readonly approvedCalls: readonly string[];
      /**
       * Resuming an attempt that was lost from its last checkpoint: the open calls that had
       * started under it (a non-idempotent one is not run again: its result is `ERR_INTERRUPTED`).
       */
      readonly started?: readonly string[] | undefined;
    };

/**
 * The operations a run's worker may ask of the supervisor while it runs, served
 * by the tree for every transport (a remote one relays them here): the same
 * code, checks and limits wherever the attempt runs. A transport parses and
 * checks what arrives (capability, schema, flood and question limits) before it
 * calls these.
 *
 * @example
 * ```ts
 * declare const host: HostOperations
 * host.events([['t', 'tool.execute.start', { toolName: 'search' }]])
 * ```
 */
export interface HostOperations {
  readonly agentId: string;
  readonly runId: string;
  /** Ask the approval handler about a call; resolves with its raw decision. */
  approve(request: HostApprovalRequest): Promise<unknown>;
  /** Run a nested `task` call; `undefined`: nobody waits any more (the run was cancelled). */
  task(request: HostTaskRequest): Promise<HostTaskResult | undefined>;
  /** A batch of the run's events (telemetry, model deltas, questions), in order. */
  events(events: readonly HostEvent[]): void;
  /** Save a turn durably; resolves once saved. */
  checkpoint(checkpoint: HostCheckpoint): Promise<unknown>;
}

/**
 * One attempt of one run, as the tree hands it to a transport. Everything in it
 * lives in memory: the scope and toolContext are never stored by a transport
 * (a remote one hands them to the host that claimed the attempt, in its grant).
 *
 * @example
 * ```ts
 * declare const transport: RunTransport
 * declare const attempt: Attempt
 * const handle = transport.dispatch(attempt)
 * console.log(attempt.runId, attempt.attempt, (await handle.ended).end.status)
 * ```
 */
export interface Attempt {
  readonly runId: RunId;
  /** 1 for a run's first attempt, one more for each resume or re-run: a fencing token. */
  readonly attempt: number;
  /** The authority its host calls present (≥ 128 random bits, minted for this attempt only). */
  readonly capability: string;
  readonly agentId: AgentId;
  readonly parentAgentId: AgentId | undefined;
  /** The agent as its module exports it (`module` and `name` locate it). */
  readonly agent: Agent;
  /** Sealed (deep-frozen) by the supervisor. */
  readonly scope: Scope;
  /** Frozen by the supervisor. */
  readonly toolContext: Readonly<Record<string, unknown>>;
  readonly work: AttemptWork;
  /**
   * The time it has left, counted from this dispatch (its queue wait counts), as its tools see it
   * (`ctx.deadline`); `undefined`: none. The tree enforces it: it cancels the attempt (`deadline`)
   * when it passes. A remote transport sends the time left, not a time on this clock.
   */
  readonly timeoutMs: number | undefined;
  /** The host features it is served (`HostFeature` and telemetry bits). */
  readonly features: number;
  /** Already cancelled when dispatched (a child born during its parent's cancel): it starts cancelled. */
  readonly cancelled: CancelReason | undefined;
  readonly host: HostOperations;
  /** The W3C trace context of the run on this host (a remote transport may carry it; it is no secret). */
  readonly traceparent?: string | undefined;
  /**
   * A slot took it (before its end): once, or once more each time a remote transport moved it to
   * another host before any of its tools started (its host vanished; the attempt is the same).
   */
  placed?(placement: AttemptPlacement): void;
}

/** A dispatched attempt: how it ends, and the handle the tree withdraws, cancels or kills it by. *
 * @example
 * ```ts
 * declare const handle: AttemptHandle
 * const { end, usage } = await handle.ended
 * console.log(end.status, usage.inputTokens)
 * ```
 */
export interface AttemptHandle {
  /**
   * Resolves exactly once with how the attempt ended; never rejects. Every
   * `host.events` call of the attempt happens before it resolves.
   */
  readonly ended: Promise<AttemptEnd>;
}

/** What a transport reports of itself (`supervisor.stats().pool`). *
 * @example
 * ```ts
 * declare const transport: RunTransport
 * const { slots, queued, running } = transport.stats()
 * console.log(`${running}/${slots} running, ${queued} queued`)
 * ```
 */
export interface TransportStats {
  /** Attempts it can run at once. */
  readonly slots: number;
  /** Attempts waiting for a slot. */
  readonly queued: number;
  /** Attempts running. */
  readonly running: number;
  /** Attempts that ended since it started. */
  readonly completed: number;
  /** Host-channel messages it refused. */
  readonly refused: number;
  /** Anything else it measures (threads, open ports, table size...). */
  readonly [figure: string]: number;
}

/** What the supervisor gives the transport it owns, once, before the first dispatch. *
 * @example
 * ```ts
 * const host: TransportHost = {
 *   clock: systemClock,
 *   emit: (name, payload) => console.log(name, payload.reason),
 *   listening: () => true,
 * }
 * ```
 */
export interface TransportHost {
  readonly clock: Clock;
  /** Emit one of the transport's own events (`worker.recycled`, `host.refused`). */
  emit<K extends 'worker.recycled' | 'host.refused'>(name: K, payload: SupervisorEvents[K][0]): void;
  /** Whether anybody listens to `name` (build no payload for nobody). */
  listening(name: keyof SupervisorEvents): boolean;
}

/**
 * How the run tree reaches whatever runs its attempts: threads of this process
 * ({@link LocalTransport}, the default) or worker hosts on other machines. The
 * tree owns every run's record and lifecycle; a transport only runs attempts
 * and reports each one's end, exactly once.
 *
 * Promises every transport keeps (checked by `runTransportConformance` from
 * `@troupe/supervisor/testing`):
 * - `dispatch` never throws for a well-formed attempt; `ended` never rejects
 *   and resolves once;
 * - every host operation of an attempt is served before its end; none after;
 * - `withdraw` of a queued attempt ends it `cancelled` (not forced) without
 *   running anything; of a started one, returns false and changes nothing;
 * - `cancel` is cooperative: the attempt sees it at once (`isCancelled()`,
 *   its signal); one that ignores it past the grace period is killed and ends
 *   `cancelled`, forced; `kill` does that now;
 * - a tool call past its own deadline that never yields is killed (the run ends
 *   `failed` with a forced `ToolTimeoutError`);
 * - `close` stops taking attempts, lets running ones end within its budget,
 *   then kills what is left; `destroy` kills everything now; both idempotent.
 *
 * @example
 * ```ts
 * const transport: RunTransport = localTransport({ threads: 2 })
 * const supervisor = createSupervisor({ transport })
 * await supervisor.ready()
 * ```
 */
export interface RunTransport {
  /** A short name for events and errors (`local`, `bullmq`). */
  readonly name: string;
  /** How long a cancelled attempt gets to stop before it is killed (ms). */
  readonly graceMs: number;
  /** Attempts it can run at once (a tree defers a nested task rather than hold them all). */
  readonly slots: number;
  /** Called once by the supervisor that owns this transport, before anything else. */
  start(host: TransportHost): void;
  /** Resolves once it can run attempts (threads booted, connections open). */
  ready(): Promise<void>;
  dispatch(attempt: Attempt): AttemptHandle;
  /** Take a queued attempt back (it ends `cancelled`); false once a slot took it. */
  withdraw(handle: AttemptHandle): boolean;
  /** Tell a started attempt to stop (cooperative; killed after the grace period). */
  cancel(handle: AttemptHandle, reason: CancelReason): void;
  /** Stop a started attempt now (it ends `cancelled`, forced). */
  kill(handle: AttemptHandle, reason: CancelReason): void;
  /** Whether one more attempt may wait for a slot (its queue bound). */
  canQueue(): boolean;
  stats(): TransportStats;
  /** Stop taking attempts; resolves once every attempt ended (killed past `drainMs`). */
  close(options: { readonly drainMs: number }): Promise<void>;
  /** Kill every attempt and free everything now. */
  destroy(): Promise<void>;
}
