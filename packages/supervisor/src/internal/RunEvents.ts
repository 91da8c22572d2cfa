import {
  type Clock,
  type Metadata,
  type ModelDelta,
  serializedSize,
  TASK_TOOL_NAME,
  type TaskResult,
  type Usage,
} from '@troupe/core';
import { decodeError, HostFeature, type LoopEventSink, TELEMETRY_EVENTS, telemetryBit } from '@troupe/core/internal';
import type { EventEmitter } from 'eventemitter3';
import type { SupervisorEvents } from '../SupervisorEvents.js';
import type { FinalEnd, RunNode } from './RunNode.js';

/** A listener of a root's whole tree's model deltas. */
export type DeltaListener = (node: RunNode, deltas: readonly ModelDelta[]) => void;

/** The event announcing each way a subagent run ends. */
const OUTCOME_EVENTS = Object.freeze({
  done: 'subagent.done',
  failed: 'subagent.failed',
  crashed: 'subagent.crashed',
  cancelled: 'subagent.cancelled',
  incomplete: 'subagent.incomplete',
} as const);

const EMPTY: Readonly<Record<string, unknown>> = Object.freeze({});

/**
 * The run tree's events and telemetry: what every run reports to the host
 * (spawned, started, its outcome), what its worker forwards (telemetry with
 * the run's own ids, never the worker's claims about itself; model deltas,
 * to listeners of the event and of the root's stream), and the cache of
 * whether anyone listens (asked per run, recomputed only when a listener
 * was added or removed). Builds nothing for nobody.
 */
export class RunEvents {
  readonly #emitter: EventEmitter<SupervisorEvents>;
  readonly #clock: Clock;
  readonly #listenersVersion: (() => number) | undefined;
  readonly #streams = new Map<RunNode, Set<DeltaListener>>();
  /** The last `tool.execute.start` each run's worker reported (to close that call if it is killed). */
  readonly #lastToolStart = new Map<RunNode, Readonly<Record<string, unknown>>>();
  #bitsVersion = -2;
  #bitsCache = 0;
  #hasVersion = -2;
  readonly #hasCache = new Map<string, boolean>();

  constructor(emitter: EventEmitter<SupervisorEvents>, clock: Clock, listenersVersion?: () => number) {
    this.#emitter = emitter;
    this.#clock = clock;
    this.#listenersVersion = listenersVersion;
  }

  /** The host's emitter (for an event whose payload the caller built after {@link RunEvents.has}). */
  get emitter(): EventEmitter<SupervisorEvents> {
    return this.#emitter;
  }

  /** Whether anyone listens to `name`: per-run checks read a cache the listener version invalidates. */
  has(name: keyof SupervisorEvents): boolean {
    const version = this.#listenersVersion?.() ?? -1;
    if (version === -1) return this.#emitter.listenerCount(name) > 0;
    if (version !== this.#hasVersion) {
      this.#hasVersion = version;
      this.#hasCache.clear();
    }
    let known = this.#hasCache.get(name);
    if (known === undefined) {
      known = this.#emitter.listenerCount(name) > 0;
      this.#hasCache.set(name, known);
    }
    return known;
  }

  /**
   * What a worker run is told to forward: 0 when nobody listens to any loop or
   * tool event, else the telemetry feature and a bit per event with a listener
   * (a tool's start too when its stop or timeout is listened to: the
   * supervisor reports a killed call from it). Cached per listener version.
   */
  telemetryBits(): number {
    const version = this.#listenersVersion?.() ?? -1;
    if (version !== -1 && version === this.#bitsVersion) return this.#bitsCache;
    let bits = 0;
    for (const name of TELEMETRY_EVENTS) {
      if (this.#emitter.listenerCount(name as keyof SupervisorEvents) > 0) bits |= telemetryBit(name);
    }
    if (
      this.#emitter.listenerCount('tool.execute.stop') > 0 ||
      this.#emitter.listenerCount('tool.execute.timeout') > 0
    ) {
      bits |= telemetryBit('tool.execute.start');
    }
    if (bits !== 0) bits |= HostFeature.telemetry;
    this.#bitsVersion = version;
    this.#bitsCache = bits;
    return bits;
  }

  /** Whether a run's model deltas are wanted (a stream of its root, or `model.delta` listeners). */
  streamed(node: RunNode): boolean {
    return this.#streams.has(node.root) || this.has('model.delta');
  }

  /** Subscribe to the model deltas of a root's whole tree; returns the unsubscribe. */
  onDeltas(root: RunNode, listener: DeltaListener): () => void {
    let set = this.#streams.get(root);
    if (set === undefined) {
      set = new Set();
      this.#streams.set(root, set);
    }
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0) this.#streams.delete(root);
    };
  }

  /** A root left the tree: its stream listeners go. */
  forgetRoot(root: RunNode): void {
    this.#streams.delete(root);
  }

  /** A run's work left this dispatch: what its worker reported of its calls goes. */
  forgetRun(node: RunNode): void {
    if (this.#lastToolStart.size > 0) this.#lastToolStart.delete(node);
  }

  /** The loop's events for a run on this thread: the host's emitter, with the run's ids added. */
  sink(node: RunNode): LoopEventSink | undefined {
    if (this.telemetryBits() === 0) return undefined;
    const events = this.#emitter;
    return {
      listenerCount: (name) => events.listenerCount(name as keyof SupervisorEvents),
      emit: (name, ...args) => {
        // The run's ids win; set after the spread rather than added in the literal (see telemetry).
        const payload: Record<string, unknown> = { runId: node.id, path: node.path, ...args[0] };
        payload.runId = node.id;
        payload.path = node.path;
        return (events.emit as (n: string, p: unknown) => boolean)(name, payload);
      },
    };
  }

  /** A worker's telemetry event, re-emitted with the ids of the run its capability names (never its own claims). */
  telemetry(node: RunNode, name: string, raw: Record<string, unknown>): void {
    if (!TELEMETRY_EVENTS.has(name)) return;
    const event = name as keyof SupervisorEvents;
    if (this.#emitter.listenerCount(event) === 0 && name !== 'tool.execute.start') return;
    // The run's ids win over the worker's keys. They are placed before the spread and set again after
    // it, not added after it: on Node 20 (V8 11.3) a literal that adds keys after a spread takes a
    // slow path (1–2 µs an event, against 0.15 µs). The spread defines keys as own data properties,
    // so a worker's `__proto__` key stays a key (an `Object.assign` would set the prototype).
    const payload: Record<string, unknown> = { agentId: node.agentId, runId: node.id, path: node.path, ...raw };
    payload.agentId = node.agentId;
    payload.runId = node.id;
    payload.path = node.path;
    if (typeof payload.at !== 'number') payload.at = this.#clock.now();
    if (name === 'tool.execute.start') this.#lastToolStart.set(node, payload);
    if (name === 'tool.execute.exception') payload.reason = decodeShape(payload.reason);
    else if (name === 'model.error') payload.error = decodeShape(payload.error);
    (this.#emitter.emit as (n: string, p: unknown) => boolean)(event, payload);
  }

  /** Model deltas of a run: to `model.delta` listeners and to its root's stream. */
  deltas(node: RunNode, deltas: readonly ModelDelta[]): void {
    if (this.has('model.delta')) {
      this.#emitter.emit('model.delta', {
        agentId: node.agentId,
        runId: node.id,
        path: node.path,
        deltas,
        at: this.#clock.now(),
      });
    }
    const listeners = this.#streams.get(node.root);
    if (listeners !== undefined) for (const listener of listeners) listener(node, deltas);
  }

  /**
   * The killed worker could not report the end of its call: report it for it, as
   * the executor would have (timeout, then stop), when someone listens.
   */
  killedCall(node: RunNode, error: Error): void {
    const start = this.#lastToolStart.get(node);
    const toolName = (error as { toolName?: unknown }).toolName;
    if (start === undefined || start.toolName !== toolName) return;
    const at = this.#clock.now();
    const timeoutMs = (error as { timeoutMs?: number }).timeoutMs ?? 0;
    const ids = { agentId: node.agentId, runId: node.id, path: node.path };
    if (this.has('tool.execute.timeout')) {
      this.#emitter.emit('tool.execute.timeout', { ...(start as object), ...ids, timeoutMs, at } as never);
    }
    if (this.has('tool.execute.stop')) {
      const started = typeof start.at === 'number' ? start.at : at;
      this.#emitter.emit('tool.execute.stop', {
        ...(start as object),
        ...ids,
        durationMs: at - started,
        status: 'error',
        failure: 'timeout',
        at,
      } as never);
    }
  }

  /** A deferred task call stops when its child ends (its worker reported no stop for it). */
  deferredCallStopped(node: RunNode, toolCallId: string, since: number, outcome: TaskResult): void {
    if (!this.has('tool.execute.stop')) return;
    const at = this.#clock.now();
    (this.#emitter.emit as (name: string, payload: unknown) => boolean)('tool.execute.stop', {
      toolName: TASK_TOOL_NAME,
      toolCallId,
      agentId: node.agentId,
      attempt: 1,
      at,
      durationMs: Math.max(0, at - since),
      status: outcome.status === 'done' ? 'ok' : 'error',
      failure: outcome.status === 'done' ? undefined : 'returned',
      approval: undefined,
      runId: node.id,
      path: node.path,
    });
  }

  /** A subagent run (or a direct spawn) starts or resumes: its placement in the tree and what its channels weigh. */
  spawned(node: RunNode, metadata: Metadata | undefined, resumed = false): void {
    if (!this.has('subagent.spawned')) return;
    const bytes = channelBytes(node.scope, node.toolContext, metadata);
    this.#emitter.emit('subagent.spawned', {
      agentId: node.agentId,
      runId: node.id,
      parentAgentId: node.parent?.agentId,
      agent: node.agent.name,
      resumed,
      path: node.path,
      bytes,
      toolCallId: node.toolCallId,
      model: node.agent.model.name,
      provider: node.agent.model.provider,
      at: this.#clock.now(),
    });
  }

  /** A parent message's run starts (synchronously in the call that started it: listeners see its async context). */
  runStarted(node: RunNode, resumed: boolean): void {
    if (!this.has('agent.run.started')) return;
    const model = node.agent.model;
    this.#emitter.emit('agent.run.started', {
      agentId: node.agentId,
      runId: node.id,
      path: node.path,
      agent: node.agent.name,
      resumed,
      model: model.name,
      provider: model.provider,
      at: this.#clock.now(),
    });
  }

  /** A subagent run waits on a person somewhere below it. */
  suspended(node: RunNode, requestId: string, totalUsage: Usage): void {
    if (!this.has('subagent.suspended')) return;
    this.#emitter.emit('subagent.suspended', {
      agentId: node.agentId,
      runId: node.id,
      parentAgentId: node.parent?.agentId,
      requestId,
      path: node.path,
      usage: node.usage,
      totalUsage,
      threadId: node.threadId,
      host: node.host,
      dispatchedAt: node.dispatchedAt,
      at: this.#clock.now(),
    });
  }

  /**
   * A subagent run (or a direct spawn) ended, with its whole subtree: its
   * outcome event. The fields every outcome shares are built once; each
   * status adds its own.
   */
  outcome(node: RunNode, totalUsage: Usage): void {
    const end = node.end as FinalEnd;
    if (!this.has(OUTCOME_EVENTS[end.status])) return;
    // One literal, then the status's own fields set on it (a spread into a literal is slow on Node 20).
    const payload: Record<string, unknown> = {
      agentId: node.agentId,
      runId: node.id,
      parentAgentId: node.parent?.agentId,
      path: node.path,
      usage: node.usage,
      totalUsage,
      threadId: node.threadId,
      host: node.host,
      dispatchedAt: node.dispatchedAt,
      at: this.#clock.now(),
    };
    switch (end.status) {
      case 'done':
      case 'incomplete':
        payload.turns = end.turns;
        break;
      case 'failed':
        payload.error = end.error;
        break;
      case 'crashed':
        payload.exitCode = end.exitCode;
        payload.error = end.error;
        break;
      case 'cancelled':
        payload.reason = end.reason;
        payload.forced = end.forced;
        break;
    }
    (this.#emitter.emit as (n: string, p: unknown) => boolean)(OUTCOME_EVENTS[end.status], payload);
  }

  /** A write of a run failed (`persistence.failed`): the run goes on, the host is told. */
  saveFailed(node: RunNode, error: unknown): void {
    if (!this.has('persistence.failed')) return;
    this.#emitter.emit('persistence.failed', {
      agentId: node.agentId,
      runId: node.id,
      error: error instanceof Error ? error : new Error(String(error)),
      at: this.#clock.now(),
    });
  }
}

function decodeShape(value: unknown): unknown {
  if (typeof value !== 'object' || value === null) return value;
  try {
    return decodeError(value as never);
  } catch {
    return value;
  }
}

function channelBytes(
  scope: unknown,
  toolContext: Readonly<Record<string, unknown>>,
  metadata: Metadata | undefined,
): { scope: number; toolContext: number; metadata: number; total: number } {
  const s = sizeOf(scope);
  const t = sizeOf(toolContext);
  const m = sizeOf(metadata ?? EMPTY);
  return { scope: s, toolContext: t, metadata: m, total: s + t + m };
}

// The size of a frozen value is measured once (a scope, a toolContext, a metadata snapshot are
// frozen, and every spawn of a fan-out carries the same ones).
const sizes = new WeakMap<object, number>();

function sizeOf(value: unknown): number {
  const cacheable = typeof value === 'object' && value !== null && Object.isFrozen(value);
  if (cacheable) {
    const known = sizes.get(value);
    if (known !== undefined) return known;
  }
  let size: number;
  try {
    size = serializedSize(value);
  } catch {
    size = 0;
  }
  if (cacheable) sizes.set(value, size);
  return size;
}
