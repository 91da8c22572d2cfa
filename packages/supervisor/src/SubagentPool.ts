import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import type { MessagePort, ResourceLimits } from 'node:worker_threads';
import {
  type Agent,
  type AgentId,
  type AgentRef,
  type Answer,
  assertCloneable,
  BackpressureError,
  CancelledError,
  type CancelReason,
  type Clock,
  ClosedError,
  createId,
  DEFAULT_SCOPE_BUDGET_BYTES,
  decodeError,
  decodeSubagentResult,
  deepFreeze,
  encodeSubagentTask,
  HOST_OPEN,
  type HostApi,
  HostApprovalRequest,
  HostFeature,
  type HostTaskRequest,
  type HostTaskResult,
  HostTelemetry,
  InvalidArgumentError,
  isAgent,
  isDeepFrozen,
  isTroupeError,
  type LoopState,
  type Metadata,
  parseHostTaskRequest,
  type RunId,
  type SubagentTask,
  sealScope,
  serializedBytes,
  serializedSize,
  serializedSizeAtMost,
  TaskFlag,
  ToolTimeoutError,
  TroupeError,
  WORKER_READY,
  WorkerCrashedError,
} from '@troupe/core';
import { loadAgent, loadedAgent, portEndpoint, systemClock, WORKER_URL } from '@troupe/subagent';
import { expose } from 'comlink';
import { Piscina } from 'piscina';
import { z } from 'zod';
import { CancellationTable } from './CancellationTable.js';
import type { SubagentOutcome } from './SubagentOutcome.js';
import { Watchdog, type WatchdogKillCause } from './Watchdog.js';

/** Options of {@link SubagentPool}; validated once, at construction. */
export interface SubagentPoolOptions {
  /** Worker threads, started up front (default: the machine's available parallelism). */
  readonly threads?: number;
  /** Per-worker V8 limits; a worker over its heap limit dies and its run ends `crashed`. */
  readonly resourceLimits?: ResourceLimits;
  /** Runs that may wait for a thread; past it `run` rejects with a `BackpressureError` (default 1024). */
  readonly maxQueue?: number;
  /** How long a cancelled run may take to stop before its worker is killed (default 1000 ms). */
  readonly graceMs?: number;
  /** How often the watchdog looks at deadlines while runs are in flight (default 10 ms). */
  readonly watchdogIntervalMs?: number;
  /** Serialized-size budget of a scope (default 4096 bytes). */
  readonly scopeBudgetBytes?: number;
  readonly clock?: Clock;
  /** Initial capacity of the cancellation table (it grows). */
  readonly tableCapacity?: number;
}

const PoolOptions = z
  .object({
    threads: z.number().int().min(1).max(256).optional(),
    resourceLimits: z
      .object({
        maxOldGenerationSizeMb: z.number().positive().optional(),
        maxYoungGenerationSizeMb: z.number().positive().optional(),
        codeRangeSizeMb: z.number().positive().optional(),
        stackSizeMb: z.number().positive().optional(),
      })
      .strict()
      .optional(),
    maxQueue: z.number().int().min(0).optional(),
    graceMs: z.number().finite().min(0).optional(),
    watchdogIntervalMs: z.number().finite().min(1).optional(),
    scopeBudgetBytes: z.number().int().positive().optional(),
    clock: z
      .custom<Clock>((c) => typeof (c as Clock)?.now === 'function' && typeof (c as Clock)?.setTimeout === 'function', {
        message: 'a Clock has now(), setTimeout() and clearTimeout()',
      })
      .optional(),
    tableCapacity: z.number().int().positive().optional(),
  })
  .strict();

/** What the supervisor offers one run over its host channel. */
export interface RunHost {
  /** Decide on a call of a tool with `requiresApproval` (the handler's raw decision). */
  /** `signal` aborts when the run ends (cancelled, crashed or done): stop asking. */
  readonly approve?: ((request: HostApprovalRequest, signal: AbortSignal) => Promise<unknown>) | undefined;
  /** Run a subagent's own `task` call. */
  readonly runTask?: ((request: HostTaskRequest) => Promise<HostTaskResult>) | undefined;
  /** Re-emit a worker's telemetry event. */
  readonly telemetry?: ((event: HostTelemetry) => void) | undefined;
}

/** One subagent run to start. */
export interface SpawnSpec {
  /** The agent, or a reference to it by module URL and name. */
  readonly agent: Agent | AgentRef;
  /** The task's instructions. */
  readonly input?: string | undefined;
  /** Who the run acts for; checked cloneable and within budget before anything is posted. */
  readonly scope: unknown;
  readonly toolContext?: Readonly<Record<string, unknown>> | undefined;
  /** The metadata snapshot the child starts from (default `{}`). */
  readonly metadata?: Metadata | undefined;
  /** Default: a fresh id. A delegated child's is `<parentId>-sub-<n>`. */
  readonly agentId?: AgentId | undefined;
  /** The parent's id; its cancellation reaches this run, and its deadline bounds it. */
  readonly parentAgentId?: AgentId | undefined;
  readonly ancestry?: readonly AgentId[] | undefined;
  /** Relative deadline; combined with `deadline` and the parent's, the earliest wins. */
  readonly timeoutMs?: number | undefined;
  /** Absolute deadline in the Clock base. */
  readonly deadline?: number | undefined;
  /** Resume a suspended run. */
  readonly resume?:
    | { readonly state: LoopState; readonly answer: Answer; readonly approvedCalls?: readonly string[] | undefined }
    | undefined;
  readonly host?: RunHost | undefined;
  /** Aborting it cancels the run (reason `user`). */
  readonly signal?: AbortSignal | undefined;
  /** Forward the worker's tool telemetry over the host channel. */
  readonly telemetry?: boolean | undefined;
}

interface InFlight {
  readonly runId: RunId;
  readonly agentId: AgentId;
  readonly slot: number;
  readonly module: string;
  readonly agent: string;
  readonly host: RunHost | undefined;
  kill: WatchdogKillCause | undefined;
  /** The tool call the watchdog killed (from the slot's lane info), for the error and the events. */
  killedCall: { readonly toolName: string; readonly timeoutMs: number } | undefined;
  /** The last `tool.execute.start` the worker reported (telemetry on), to close it when its worker is killed. */
  lastToolStart: Readonly<Record<string, unknown>> | undefined;
  /** Aborted when the run ends; made only when a host call needs it. */
  ended?: AbortController;
}

/** Figures about the pool, for daemons and the soak benchmark. */
export interface SubagentPoolStats {
  readonly threads: number;
  readonly running: number;
  readonly queued: number;
  /** Host channels open (at most one per worker thread). */
  readonly openPorts: number;
  readonly tableSize: number;
  readonly completed: number;
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** A scope as it crosses (see SubagentPool#scopeWire). */
interface ScopeWire {
  /** The scope, or its serialized bytes over a SharedArrayBuffer. */
  readonly scope: unknown;
  /** 0: not versioned (the scope can still change). */
  readonly version: number;
  readonly serialized: boolean;
}

/** A spawn without a scope. */
const NO_SCOPE: ScopeWire = Object.freeze({ scope: undefined, version: 0, serialized: false });

/** From this serialized size a scope crosses as shared bytes (see #scopeWire). */
const SERIALIZED_SCOPE_MIN_BYTES = 8 * 1024;

/** `bytes` copied into a SharedArrayBuffer: posting it copies nothing. */
function sharedCopy(bytes: Uint8Array): Uint8Array {
  const shared = new Uint8Array(new SharedArrayBuffer(bytes.byteLength));
  shared.set(bytes);
  return shared;
}

const EXIT_CODE = /worker exited with code: (-?\d+)/;
const EMPTY: Readonly<Record<string, unknown>> = Object.freeze({});
const NO_EVENTS: readonly never[] = Object.freeze([]);
const NO_UPDATES: readonly never[] = Object.freeze([]);
const ZERO_USAGE = Object.freeze({ inputTokens: 0, outputTokens: 0 });

/**
 * A warm pool of worker threads running subagents (piscina underneath).
 *
 * Each run gets a slot in the shared cancellation table, a structured-clone
 * copy of its three channels, and a lazily opened host channel back to the
 * supervisor. A cancel reaches its tools through shared memory; a run that
 * does not stop within the grace period, or a tool that overruns its timeout
 * without yielding, has its worker killed and replaced. A crashing worker
 * never takes the pool down.
 *
 * Use it directly to run subagents programmatically; `createSupervisor` uses
 * it underneath. `close()` drains, `destroy()` is immediate, both idempotent;
 * `await using pool = new SubagentPool()` closes it.
 */
export class SubagentPool {
  readonly #clock: Clock;
  readonly #piscina: Piscina;
  readonly #table: CancellationTable;
  readonly #watchdog: Watchdog;
  readonly #threads: number;
  readonly #maxQueue: number;
  readonly #scopeBudget: number;
  readonly #byAgent = new Map<string, InFlight>();
  readonly #checkedToolContexts = new WeakSet<object>();
  readonly #drainWaiters: (() => void)[] = [];
  #running = 0;
  #completed = 0;
  // One host channel per worker thread, by threadId (see HostApi).
  readonly #hostPorts = new Map<number, MessagePort>();
  #closing: Promise<void> | undefined;
  #closed = false;
  #destroyed = false;
  readonly #ready: Promise<void>;
  #markBooted: ((thread: number) => void) | undefined;

  constructor(options: SubagentPoolOptions = {}) {
    const parsed = PoolOptions.safeParse(options);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new InvalidArgumentError(
        `invalid SubagentPool option ${issue?.path.join('.') || ''}: ${issue?.message ?? 'invalid'}`,
        { cause: parsed.error },
      );
    }
    const o = parsed.data;
    this.#clock = o.clock ?? systemClock;
    this.#threads = o.threads ?? availableParallelism();
    this.#maxQueue = o.maxQueue ?? 1024;
    this.#scopeBudget = o.scopeBudgetBytes ?? DEFAULT_SCOPE_BUDGET_BYTES;
    this.#table = new CancellationTable({
      clock: this.#clock,
      ...(o.tableCapacity === undefined ? {} : { capacity: o.tableCapacity }),
    });
    this.#watchdog = new Watchdog({
      table: this.#table,
      clock: this.#clock,
      graceMs: o.graceMs ?? 1000,
      intervalMs: o.watchdogIntervalMs ?? 10,
      kill: (key, cause) => this.#kill(key, cause),
    });
    let markReady: () => void = () => {};
    this.#ready = new Promise<void>((resolve) => {
      markReady = resolve;
    });
    this.#piscina = new Piscina({
      filename: fileURLToPath(WORKER_URL),
      minThreads: this.#threads,
      maxThreads: this.#threads,
      idleTimeout: Number.POSITIVE_INFINITY,
      // Piscina's own bound is a backstop; ours is checked first for a typed error.
      maxQueue: this.#maxQueue + this.#threads,
      // Piscina's run/wait histograms cost a record per task and nothing here reads them.
      recordTiming: false,
      workerData: { cancelBuffer: this.#table.buffer },
      ...(o.resourceLimits === undefined ? {} : { resourceLimits: o.resourceLimits as ResourceLimits }),
    });
    const booted = new Set<number>();
    this.#markBooted = (thread: number) => {
      booted.add(thread);
      if (booted.size >= this.#threads) {
        markReady();
        this.#markBooted = undefined;
      }
    };
    // Without an 'error' listener an error in an idle worker would crash the process.
    this.#piscina.on('error', () => {});
    this.#piscina.on('message', (message: unknown) => this.#onWorkerMessage(message));
  }

  /**
   * Resolves once every thread has booted and loaded the subagent runtime
   * (the pool starts them at construction), so the first run pays no boot.
   */
  ready(): Promise<void> {
    return this.#ready;
  }

  /** The shared cancellation table (the supervisor registers parent agents in it too). */
  get table(): CancellationTable {
    return this.#table;
  }

  get clock(): Clock {
    return this.#clock;
  }

  /** Figures about the pool. */
  stats(): SubagentPoolStats {
    return {
      threads: this.#piscina.threads.length,
      running: this.#running,
      queued: this.#piscina.queueSize,
      openPorts: this.#hostPorts.size,
      tableSize: this.#table.size,
      completed: this.#completed,
    };
  }

  /**
   * Cancel a run (and every run below it) by agent id: its tools see the
   * cancel at once; if it has not ended after the grace period its worker is
   * killed and the outcome is `cancelled` with `forced: true`. Returns false
   * for an unknown or finished agent.
   */
  cancel(agentId: AgentId, reason: CancelReason = 'user'): boolean {
    const cancelled = this.#table.cancel(agentId, reason);
    if (cancelled) this.#watchdog.cancelled(agentId);
    return cancelled;
  }

  /**
   * Run one subagent to its outcome. Rejects only for bad input
   * (`InvalidArgumentError`: unknown agent, scope over budget or not
   * cloneable — all before anything is posted), a full queue
   * (`BackpressureError`) or a closed pool (`ClosedError`); every way the run
   * itself can end is an outcome.
   */
  run(spec: SpawnSpec): Promise<SubagentOutcome> {
    // Synchronous up to the post when the agent's module is already loaded:
    // every await on this path is paid by every run. Errors still reject.
    try {
      if (this.#closed || this.#closing !== undefined) {
        throw new ClosedError('the subagent pool is closed: create a new one');
      }
      if (typeof spec !== 'object' || spec === null) {
        throw new InvalidArgumentError('run(spec): pass a spawn spec object');
      }
      const ref = agentRefOf(spec.agent);
      if (loadedAgent(ref.module, ref.name) === undefined) {
        return this.#checkAgent(ref).then(() => this.run(spec));
      }
      return this.#dispatch(this.#prepare(spec, ref), spec);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  #prepare(spec: SpawnSpec, ref: AgentRef): SubagentTask {
    const scope = this.#sealScope(spec.scope);
    const toolContext = spec.toolContext === undefined ? EMPTY : this.#checkToolContext(spec.toolContext);
    const metadata = spec.metadata ?? EMPTY;
    if (!Object.isFrozen(metadata)) assertCloneable(metadata, 'metadata');
    if (spec.input !== undefined && typeof spec.input !== 'string')
      throw new InvalidArgumentError('input must be a string');
    if (this.#piscina.queueSize >= this.#maxQueue && this.#running >= this.#threads) {
      throw new BackpressureError(
        `the subagent queue is full (${this.#maxQueue} runs waiting for a thread): retry later or raise maxQueue`,
        this.#maxQueue,
      );
    }
    let deadline = spec.deadline;
    if (deadline !== undefined && (!Number.isFinite(deadline) || deadline < 0)) {
      throw new InvalidArgumentError(`deadline must be a finite time in the Clock base, got ${deadline}`);
    }
    if (spec.timeoutMs !== undefined) {
      if (!Number.isFinite(spec.timeoutMs) || spec.timeoutMs < 0) {
        throw new InvalidArgumentError(`timeoutMs must be a non-negative number of ms, got ${spec.timeoutMs}`);
      }
      const d = this.#clock.now() + spec.timeoutMs;
      deadline = deadline === undefined ? d : Math.min(deadline, d);
    }
    const agentId = spec.agentId ?? createId('agent');
    if (this.#byAgent.has(agentId)) throw new InvalidArgumentError(`agent ${agentId} is already running`);
    const parent =
      spec.parentAgentId !== undefined && this.#table.has(spec.parentAgentId) ? spec.parentAgentId : undefined;
    const slot = this.#table.register(agentId, { parent, deadline });
    // Defaults are left out: every property is paid for on both threads (see SubagentTaskWire).
    const wire = this.#scopeWire(scope);
    const task: Mutable<SubagentTask> = {
      module: ref.module,
      agent: ref.name,
      agentId,
      scope: wire.scope,
      slot: slot.index,
      generation: slot.generation,
      host:
        (spec.host?.approve === undefined ? 0 : HostFeature.approval) |
        (spec.host?.runTask === undefined ? 0 : HostFeature.spawn) |
        (spec.telemetry === true && spec.host?.telemetry !== undefined ? HostFeature.telemetry : 0) |
        (wire.serialized ? TaskFlag.serializedScope : 0),
    };
    if (wire.version !== 0) task.scopeVersion = wire.version;
    if (spec.parentAgentId !== undefined) task.parentAgentId = spec.parentAgentId;
    if (spec.ancestry !== undefined && spec.ancestry.length > 0) task.ancestry = [...spec.ancestry];
    if (spec.input !== undefined) task.input = spec.input;
    if (toolContext !== EMPTY && Object.keys(toolContext).length > 0)
      task.toolContext = toolContext as Record<string, unknown>;
    if (Object.keys(metadata).length > 0) task.metadata = metadata as Record<string, unknown>;
    if (slot.deadline !== undefined) task.deadline = slot.deadline;
    if (spec.resume !== undefined) {
      task.resume = {
        state: spec.resume.state,
        answer: spec.resume.answer,
        approvedCalls: [...(spec.resume.approvedCalls ?? [])],
      };
    }
    return task;
  }

  async #dispatch(task: SubagentTask, spec: SpawnSpec): Promise<SubagentOutcome> {
    const agentId = task.agentId as AgentId;
    const runId = createId('run');
    const flight: InFlight = {
      runId,
      agentId,
      slot: task.slot,
      module: task.module,
      agent: task.agent,
      host: spec.host,
      kill: undefined,
      killedCall: undefined,
      lastToolStart: undefined,
    };
    this.#byAgent.set(agentId, flight);
    this.#running++;
    this.#watchdog.track(agentId);
    const signal = spec.signal;
    let onAbort: (() => void) | undefined;
    if (signal !== undefined) {
      onAbort = () => {
        this.cancel(agentId, 'user');
      };
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
    }
    let outcome: SubagentOutcome;
    try {
      // No AbortSignal per task: a forced stop terminates the worker that owns the slot (see #kill).
      const raw: unknown = await this.#piscina.run(encodeSubagentTask(task));
      outcome = this.#fromResult(raw, flight);
    } catch (error) {
      outcome = this.#fromRejection(error, flight);
    } finally {
      if (onAbort !== undefined) signal?.removeEventListener('abort', onAbort);
      flight.ended?.abort(new CancelledError('shutdown', `run ${agentId} ended`));
      this.#watchdog.untrack(agentId);
      this.#byAgent.delete(agentId);
      this.#running--;
      this.#completed++;
      if (this.#byAgent.size === 0 && this.#drainWaiters.length > 0) {
        for (const resolve of this.#drainWaiters.splice(0)) resolve();
      }
    }
    // A run that died or was killed may leave nested runs behind: stop them first.
    if (
      outcome.status === 'crashed' ||
      (outcome.status === 'cancelled' && outcome.forced) ||
      flight.kill !== undefined
    ) {
      this.#table.cancel(agentId, 'parent');
    }
    this.#table.release(agentId);
    if (outcome.status === 'failed' && isTroupeError(outcome.error, 'ERR_UNKNOWN_AGENT')) {
      throw new InvalidArgumentError(outcome.error.message, { code: 'ERR_UNKNOWN_AGENT', cause: outcome.error });
    }
    return outcome;
  }

  #fromResult(raw: unknown, flight: InFlight): SubagentOutcome {
    const parsed = decodeSubagentResult(raw);
    if (parsed.error !== undefined) {
      return {
        status: 'failed',
        agentId: flight.agentId,
        runId: flight.runId,
        error: new TroupeError(`the worker returned a malformed result: ${parsed.error}`, {
          code: 'ERR_PROTOCOL',
        }),
        events: [],
        usage: { inputTokens: 0, outputTokens: 0 },
        turns: 0,
      };
    }
    const r = parsed.result;
    // Literals, not spreads: this runs for every run.
    const { agentId, runId } = flight;
    const events = r.events ?? NO_EVENTS;
    const usage = r.usage ?? ZERO_USAGE;
    const turns = r.turns;
    switch (r.status) {
      case 'done':
        return {
          agentId,
          runId,
          events,
          usage,
          turns,
          status: 'done',
          result: r.text,
          updates: r.updates ?? NO_UPDATES,
        };
      case 'failed':
        return { agentId, runId, events, usage, turns, status: 'failed', error: decodeError(r.error) };
      case 'incomplete':
        return { agentId, runId, events, usage, turns, status: 'incomplete' };
      case 'cancelled':
        return { agentId, runId, status: 'cancelled', reason: r.reason, forced: false };
      case 'suspended':
        return { agentId, runId, events, usage, turns, status: 'suspended', request: r.request, state: r.state };
    }
  }

  #fromRejection(error: unknown, flight: InFlight): SubagentOutcome {
    const base = { agentId: flight.agentId, runId: flight.runId };
    const kill = flight.kill;
    if (kill !== undefined) {
      if (kill.kind === 'lane-timeout') {
        const call = flight.killedCall ?? { toolName: `a tool (call lane ${kill.lane})`, timeoutMs: 0 };
        this.#reportKilledCall(flight, call);
        return {
          ...base,
          status: 'failed',
          error: new ToolTimeoutError(call.toolName, call.timeoutMs, true),
          events: [],
          usage: { inputTokens: 0, outputTokens: 0 },
          turns: 0,
        };
      }
      return { ...base, status: 'cancelled', reason: kill.reason, forced: true };
    }
    const err = error instanceof Error ? error : new Error(String(error));
    if (this.#destroyed) {
      // destroy() tore the pool down under the run.
      return { ...base, status: 'cancelled', reason: 'shutdown', forced: true };
    }
    const match = EXIT_CODE.exec(err.message);
    const exitCode = match !== null ? Number(match[1]) : 1;
    const what =
      (err as { code?: unknown }).code === 'ERR_WORKER_OUT_OF_MEMORY'
        ? 'ran out of memory (resourceLimits)'
        : match !== null
          ? `exited with code ${exitCode}`
          : `died: ${err.message}`;
    return {
      ...base,
      status: 'crashed',
      exitCode,
      error: new WorkerCrashedError(`the worker running ${flight.agentId} ${what}; the pool replaced it`, exitCode, {
        cause: err,
      }),
    };
  }

  #kill(agentId: string, cause: WatchdogKillCause): void {
    const flight = this.#byAgent.get(agentId);
    if (flight === undefined || flight.kill !== undefined) return;
    const owner = this.#table.slots.owner(flight.slot);
    const worker = owner === 0 ? undefined : this.#piscina.threads.find((w) => w.threadId === owner);
    if (worker === undefined) {
      // Not started yet (still queued): it will see its cancel when it starts.
      // Keep watching, in case it starts and then ignores it.
      this.#watchdog.track(agentId);
      return;
    }
    flight.kill = cause;
    if (cause.kind === 'lane-timeout') {
      // Read what the call is before the slot is released: its tool and timeout.
      const info = this.#table.slots.laneInfo(flight.slot, cause.lane);
      const agent = loadedAgent(flight.module, flight.agent);
      if (info !== undefined && agent !== undefined) {
        const toolName = agent.tools[info.tool]?.name ?? (info.tool === agent.tools.length ? 'task' : undefined);
        if (toolName !== undefined) flight.killedCall = { toolName, timeoutMs: info.timeoutMs ?? 0 };
      }
    }
    // Piscina sees the exit, rejects the task and starts a replacement.
    void worker.terminate();
  }

  // The killed worker could not report the end of its call: report it for it,
  // as the executor would have (timeout, then stop), when telemetry is on.
  #reportKilledCall(flight: InFlight, call: { readonly toolName: string; readonly timeoutMs: number }): void {
    const start = flight.lastToolStart;
    const host = flight.host;
    if (start === undefined || host?.telemetry === undefined || start.toolName !== call.toolName) return;
    const telemetry = (event: HostTelemetry): void => host.telemetry?.(event);
    const at = this.#clock.now();
    telemetry({ event: 'tool.execute.timeout', payload: { ...start, timeoutMs: call.timeoutMs, at } });
    const started = typeof start.at === 'number' ? start.at : at;
    telemetry({ event: 'tool.execute.stop', payload: { ...start, durationMs: at - started, status: 'error', at } });
  }

  #onWorkerMessage(message: unknown): void {
    if (typeof message !== 'object' || message === null) return;
    const booted = (message as Record<string, unknown>)[WORKER_READY];
    if (typeof booted === 'number') {
      this.#markBooted?.(booted);
      return;
    }
    const thread = (message as Record<string, unknown>)[HOST_OPEN];
    const port = (message as { port?: MessagePort }).port;
    if (typeof thread !== 'number' || port === undefined) return;
    this.#hostPorts.get(thread)?.close();
    this.#hostPorts.set(thread, port);
    // The worker's end closes when the worker dies: forget the port then.
    port.once('close', () => {
      if (this.#hostPorts.get(thread) === port) this.#hostPorts.delete(thread);
    });
    port.unref();
    expose(this.#hostApiFor(thread), portEndpoint(port));
  }

  /**
   * What a worker's host channel answers. A call names its run; it is served
   * only while that run is in flight on that very thread (the slot's owner),
   * so a worker cannot act for a run it does not run.
   */
  #hostApiFor(thread: number): HostApi {
    const hostOf = (agentId: unknown): RunHost | undefined | null => {
      if (typeof agentId !== 'string') return null;
      const flight = this.#byAgent.get(agentId);
      if (flight === undefined || this.#table.slots.owner(flight.slot) !== thread) return null;
      return flight.host;
    };
    return {
      approve: async (agentId, raw) => {
        const host = hostOf(agentId);
        const parsed = HostApprovalRequest.safeParse(raw);
        if (host === null) return { decision: 'reject', reason: 'not a run of this worker' };
        if (!parsed.success || host?.approve === undefined) {
          return {
            decision: 'reject',
            reason: parsed.success ? 'no approval handler is configured' : 'malformed approval request',
          };
        }
        const flight = this.#byAgent.get(agentId as string) as InFlight;
        flight.ended ??= new AbortController();
        return host.approve(parsed.data, flight.ended.signal);
      },
      async runTask(agentId, raw) {
        const host = hostOf(agentId);
        const parsed = parseHostTaskRequest(raw);
        if (host === null || parsed === undefined || host?.runTask === undefined) {
          const message =
            host === null
              ? 'not a run of this worker'
              : parsed !== undefined
                ? 'this run cannot delegate'
                : 'malformed task request';
          return { status: 'error', error: { name: 'TroupeError', code: 'ERR_PROTOCOL', message }, events: [] };
        }
        return host.runTask(parsed);
      },
      telemetry: (agentId, raw) => {
        const host = hostOf(agentId);
        const parsed = HostTelemetry.safeParse(raw);
        if (host === null || !parsed.success) return;
        if (parsed.data.event === 'tool.execute.start') {
          const flight = this.#byAgent.get(agentId as string);
          if (flight !== undefined) flight.lastToolStart = parsed.data.payload;
        }
        host?.telemetry?.(parsed.data);
      },
    };
  }

  // Import the agent's module on this thread once (cached by loadAgent), so a
  // module that does not export the agent is refused before anything is posted.
  async #checkAgent(ref: AgentRef): Promise<void> {
    try {
      await loadAgent(ref.module, ref.name);
    } catch (error) {
      throw new InvalidArgumentError((error as Error).message, { code: 'ERR_UNKNOWN_AGENT', cause: error });
    }
  }

  /**
   * How a sealed scope crosses. A heavy one as bytes: serialized once per
   * scope into a SharedArrayBuffer (posting it copies nothing) — structured
   * clone would serialize the whole graph on this thread on every hop. A lean
   * one (the norm) as it is. A scope that can never change (`isDeepFrozen`)
   * gets a version, and its wire form is kept: a worker decodes or freezes
   * each version once and reuses it. One that can (it holds anything but
   * plain objects, arrays and primitives: a Map, a Date...) is looked at
   * afresh on every spawn and never versioned.
   */
  #scopeWire(scope: unknown): ScopeWire {
    if (scope === undefined) return NO_SCOPE;
    if (typeof scope !== 'object' || scope === null) return { scope, version: 0, serialized: false };
    const known = this.#scopeWires.get(scope);
    if (known !== undefined) return known;
    if (!isDeepFrozen(scope)) {
      // It can change: what it holds now, serialized once (its size is never remembered).
      const encoded = serializedBytes(scope);
      return encoded.byteLength < SERIALIZED_SCOPE_MIN_BYTES
        ? { scope, version: 0, serialized: false }
        : { scope: sharedCopy(encoded), version: 0, serialized: true };
    }
    // A bound under the threshold settles it without serializing a lean scope;
    // a heavy one was measured when sealed, and the bytes made then are used.
    const wire: ScopeWire =
      serializedSizeAtMost(scope) < SERIALIZED_SCOPE_MIN_BYTES || serializedSize(scope) < SERIALIZED_SCOPE_MIN_BYTES
        ? { scope, version: ++this.#scopeVersions, serialized: false }
        : { scope: sharedCopy(serializedBytes(scope)), version: ++this.#scopeVersions, serialized: true };
    this.#scopeWires.set(scope, wire);
    return wire;
  }
  readonly #scopeWires = new WeakMap<object, ScopeWire>();
  #scopeVersions = 0;

  #sealScope(scope: unknown): unknown {
    // sealScope itself does not walk a scope it sealed before: only the budget is checked.
    return sealScope(scope, this.#scopeBudget);
  }

  #checkToolContext(toolContext: Readonly<Record<string, unknown>>): Readonly<Record<string, unknown>> {
    if (typeof toolContext !== 'object' || toolContext === null || Array.isArray(toolContext)) {
      throw new InvalidArgumentError('toolContext must be a plain object of static data');
    }
    if (this.#checkedToolContexts.has(toolContext)) return toolContext;
    assertCloneable(toolContext, 'toolContext');
    const frozen = deepFreeze(toolContext);
    this.#checkedToolContexts.add(frozen);
    return frozen;
  }

  /**
   * Stop taking runs, let in-flight runs finish for up to `timeoutMs`
   * (default 30 s), then cancel the rest (reason `shutdown`; killed after the
   * grace period), and resolve once every worker has exited. Idempotent.
   */
  close(options: { readonly timeoutMs?: number } = {}): Promise<void> {
    if (this.#closing !== undefined) return this.#closing;
    const timeoutMs = options.timeoutMs ?? 30_000;
    this.#closing = (async () => {
      if (this.#byAgent.size > 0) {
        const timer = this.#clock.setTimeout(() => {
          for (const flight of this.#byAgent.values()) this.cancel(flight.agentId, 'shutdown');
        }, timeoutMs);
        await new Promise<void>((resolve) => this.#drainWaiters.push(resolve));
        this.#clock.clearTimeout(timer);
      }
      this.#closed = true;
      this.#watchdog.close();
      await this.#piscina.close();
      this.#closeHostPorts();
      // Idle signal bridges of this thread (parent agents') let go of the buffer.
      this.#table.slots.wakeWatchers();
    })();
    return this.#closing;
  }

  /** Tear down at once: in-flight runs end `cancelled` (shutdown, forced). Idempotent. */
  async destroy(): Promise<void> {
    this.#closed = true;
    this.#destroyed = true;
    this.#closing ??= Promise.resolve();
    // Cancel first so nested runs stop cooperatively; piscina then terminates every worker.
    for (const flight of this.#byAgent.values()) this.#table.cancel(flight.agentId, 'shutdown');
    this.#watchdog.close();
    await this.#piscina.destroy();
    this.#closeHostPorts();
    this.#table.slots.wakeWatchers();
  }

  #closeHostPorts(): void {
    for (const port of this.#hostPorts.values()) port.close();
    this.#hostPorts.clear();
  }

  /** `await using pool = new SubagentPool()` closes the pool at the end of the block. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

function agentRefOf(agent: Agent | AgentRef): AgentRef {
  if (isAgent(agent)) {
    if (agent.module === undefined) {
      throw new InvalidArgumentError(
        `agent "${agent.name}" has no module URL, so a worker cannot load it: define it with module: import.meta.url`,
        { code: 'ERR_UNKNOWN_AGENT' },
      );
    }
    return { module: agent.module, name: agent.name };
  }
  if (typeof agent?.module !== 'string' || typeof agent?.name !== 'string') {
    throw new InvalidArgumentError('agent must be a defined agent or { module, name }', { code: 'ERR_UNKNOWN_AGENT' });
  }
  return { module: agent.module, name: agent.name };
}
