import { randomFillSync } from 'node:crypto';
import {
  type Answer,
  type Clock,
  isDeepFrozen,
  isTroupeError,
  type LoopState,
  type Metadata,
  NO_USAGE,
  serializedSize,
  ToolTimeoutError,
  TroupeError,
  type Usage,
  WorkerCrashedError,
} from '@troupe/core';
import {
  CAPABILITY_LENGTH,
  decodeError,
  decodeSubagentResult,
  encodeSubagentTask,
  HostFeature,
  serializedBytes,
  serializedSizeAtMost,
  TaskFlag,
  TaskSlot,
} from '@troupe/core/internal';
import type { CancellationTable } from '../CancellationTable.js';
import type { RunEnd, RunNode } from './RunNode.js';
import { type DispatchTicket, readResultOf, type ThreadInfo, WITHDRAWN, type WorkerPool } from './WorkerPool.js';

/** What one (re)dispatch of a node carries besides the node itself. */
export interface DispatchInput {
  /** The task's instructions (a first run). */
  readonly input?: string | undefined;
  /** The metadata snapshot a first run starts from. */
  readonly metadata?: Metadata | undefined;
  /** Resume a suspended run. */
  readonly resume?:
    | {
        readonly state: LoopState;
        readonly answer: Answer | undefined;
        readonly approvedCalls: readonly string[];
        readonly expired: boolean;
      }
    | undefined;
}

/** How a worker run ended, as the supervisor reads it. */
export interface WorkerEnd {
  readonly end: RunEnd;
  readonly usage: Usage;
  /** Event batches the worker says it posted for the run (the tree waits for them). */
  readonly sent: number;
  /** The run's last events, carried by its result (delivered after the posted batches). */
  readonly tail?: readonly unknown[] | undefined;
}

/** Options of {@link Dispatcher}. */
export interface DispatcherOptions {
  readonly pool: WorkerPool;
  readonly table: CancellationTable;
  readonly clock: Clock;
  /** Start watching a run that is now on a thread. */
  readonly track: (node: RunNode) => void;
}

/** A scope as it crosses (see Dispatcher#scopeWire). */
interface ScopeWire {
  /**
   * The scope, or its serialized bytes over a SharedArrayBuffer. A versioned
   * scope's bytes never cross themselves: each thread gets its own copy of
   * them (see `copies`).
   */
  readonly scope: unknown;
  /** 0: not versioned (the scope can still change). */
  readonly version: number;
  readonly serialized: boolean;
  /**
   * A versioned serialized scope's bytes, one copy per thread it was sent
   * to. Any thread can write any byte of a SharedArrayBuffer it holds: were
   * one buffer posted to every thread, a tool could rewrite the scope
   * another thread's run decodes next (another tenant, another role). With
   * a copy each, what a thread rewrites reaches that thread only (whose
   * realm its code owns anyway).
   */
  readonly copies: WeakMap<ThreadInfo, Uint8Array> | undefined;
}

const NO_SCOPE: ScopeWire = Object.freeze({ scope: undefined, version: 0, serialized: false, copies: undefined });

/** From this serialized size a scope crosses as shared bytes (see #scopeWire). */
const SERIALIZED_SCOPE_MIN_BYTES = 8 * 1024;

const EXIT_NOTE = /worker exited with code: (-?\d+)/;
const NO_EVENTS: readonly never[] = Object.freeze([]);
const NO_UPDATES: readonly never[] = Object.freeze([]);

/**
 * Capabilities: 18 bytes from the OS CSPRNG (144 bits) as 24 base64url
 * characters. The bytes are drawn for 227 capabilities at a time and
 * encoded at once (18 bytes are 24 characters exactly, so the encoding of
 * the pool is the encodings of its 18-byte groups end to end); each
 * capability is a slice of that string (V8 makes a slice of 13 characters or
 * more without copying). A per-character alphabet lookup (nanoid's
 * customAlphabet) built 24 strings per run; an encoding per run is a native
 * call per run.
 */
const CAPABILITIES_PER_DRAW = 227;
const capabilityBytes = Buffer.allocUnsafe((CAPABILITY_LENGTH * 3 * CAPABILITIES_PER_DRAW) / 4);
let capabilityDraw = '';
let capabilityNext = CAPABILITIES_PER_DRAW;

function mintCapability(): string {
  if (capabilityNext === CAPABILITIES_PER_DRAW) {
    randomFillSync(capabilityBytes);
    capabilityDraw = capabilityBytes.toString('base64url');
    capabilityNext = 0;
  }
  const start = capabilityNext++ * CAPABILITY_LENGTH;
  return capabilityDraw.slice(start, start + CAPABILITY_LENGTH);
}

/** Where a task tuple carries its scope (see `SubagentTaskWire`). */
const SCOPE = 7;

/** `thread`'s own copy of a versioned scope's bytes, made the first time the scope goes there. */
function scopeCopyFor(wire: ScopeWire, thread: ThreadInfo): Uint8Array {
  const copies = wire.copies as WeakMap<ThreadInfo, Uint8Array>;
  const known = copies.get(thread);
  if (known !== undefined) return known;
  const own = sharedCopy(wire.scope as Uint8Array);
  copies.set(thread, own);
  return own;
}

/** `bytes` copied into a SharedArrayBuffer: posting it copies nothing. */
function sharedCopy(bytes: Uint8Array): Uint8Array {
  const shared = new Uint8Array(new SharedArrayBuffer(bytes.byteLength));
  shared.set(bytes);
  return shared;
}

/**
 * Fills a task in at the moment piscina hands it to a thread: the run's slot
 * in that thread's own buffer (in the run's current state: cancelled if it
 * already is), the buffer itself with the thread's first task, and the time
 * the run has left.
 */
class Ticket implements DispatchTicket {
  readonly #node: RunNode;
  readonly #task: unknown[];
  readonly #dispatcher: Dispatcher;
  readonly #wire: ScopeWire;
  constructor(node: RunNode, task: unknown[], dispatcher: Dispatcher, wire: ScopeWire) {
    this.#node = node;
    this.#task = task;
    this.#dispatcher = dispatcher;
    this.#wire = wire;
  }
  onDispatch(thread: ThreadInfo): void {
    this.#dispatcher.bind(this.#node, this.#task, thread, this.#wire);
  }
}

/**
 * Turns a node's (re)dispatch into a task on the worker pool and the
 * worker's answer (or its thread's death) into a {@link RunEnd}. Keeps what
 * a scope costs to cross: a scope that cannot change is versioned, so each
 * worker keeps its copy.
 */
export class Dispatcher {
  readonly #o: DispatcherOptions;
  readonly #scopeWires = new WeakMap<object, ScopeWire>();
  #scopeVersions = 0;

  constructor(options: DispatcherOptions) {
    this.#o = options;
  }

  /** A fresh capability (≥ 128 random bits). */
  static capability(): string {
    return mintCapability();
  }

  /** Post the node's task; resolves with how its work ended (never rejects). */
  run(node: RunNode, input: DispatchInput, features: number): Promise<WorkerEnd> {
    const ref = node.agent;
    const wire = this.#scopeWire(node.scope);
    const capability = mintCapability();
    node.capability = capability;
    node.thread = undefined;
    // Made only when one of them is set: most spawns carry none.
    let extras: Record<string, unknown> | null = null;
    const parent = node.parent;
    if (parent !== undefined) {
      extras = { parentAgentId: parent.agentId, ancestry: node.path.slice(0, -1) };
    }
    const toolContext = node.toolContext;
    for (const _ in toolContext) {
      extras ??= {};
      extras.toolContext = toolContext;
      break;
    }
    const metadata = input.resume === undefined ? input.metadata : undefined;
    if (metadata !== undefined) {
      for (const _ in metadata) {
        extras ??= {};
        extras.metadata = metadata;
        break;
      }
    }
    if (input.resume !== undefined) {
      const r = input.resume;
      const resume: Record<string, unknown> = { state: r.state, approvedCalls: [...r.approvedCalls] };
      if (r.answer !== undefined) resume.answer = r.answer;
      if (r.expired) resume.expired = true;
      extras ??= {};
      extras.resume = resume;
    }
    const task = encodeSubagentTask({
      module: ref.module as string,
      agent: ref.name,
      agentId: node.agentId,
      slot: 0,
      generation: 0,
      host: features | (wire.serialized ? TaskFlag.serializedScope : 0),
      // A versioned scope's bytes are filled in at dispatch, as that thread's own copy.
      scope: wire.copies === undefined ? wire.scope : null,
      scopeVersion: wire.version === 0 ? undefined : wire.version,
      input: input.resume === undefined ? input.input : undefined,
      capability,
    }) as unknown[];
    // The extras go in as one object the ticket may still add the time left to.
    task[10] = extras;
    // One `then`, not an async function: this is every run's way back.
    const ticket = new Ticket(node, task, this, wire);
    node.ticket = ticket;
    return this.#o.pool.run(task, ticket).then(
      (raw) => {
        // The worker answered a task that carried its buffer: it has it (see bind). (A lean scope
        // version it carried in full was counted as kept when the answer came in: see bind.)
        if (task[TaskSlot.buffer] !== null && node.thread !== undefined) node.thread.bufferSent = true;
        return this.#fromResult(raw, node);
      },
      async (error: unknown) => {
        // (Set by the ticket at dispatch: TypeScript cannot see that.)
        const thread = node.thread as ThreadInfo | undefined;
        // An uncaught error is reported before the thread's exit: wait for the exit code.
        if (
          thread !== undefined &&
          thread.exitCode === undefined &&
          (thread.error !== undefined || thread.recycled !== undefined)
        ) {
          await thread.exited;
        }
        return this.#fromRejection(error, node);
      },
    );
  }

  /** The dispatch moment (called by the ticket, inside piscina's balancer: must not throw). */
  bind(node: RunNode, task: unknown[], thread: ThreadInfo, wire: ScopeWire = NO_SCOPE): void {
    const { table, clock } = this.#o;
    node.thread = thread;
    // Nothing of this task is counted as kept until it is bound with a slot (the worker refuses one without).
    thread.sentScope = 0;
    if (node.phase === 'queued') node.phase = 'running';
    if (wire.copies !== undefined) task[SCOPE] = scopeCopyFor(wire, thread);
    try {
      const handle = table.bind(node.id, thread.segment);
      task[TaskSlot.slot] = handle.index;
      task[TaskSlot.generation] = handle.generation;
    } catch {
      // No slot (the thread's buffer is full): the worker refuses a task without one.
      return;
    }
    // A lean version the thread holds goes without its scope (the worker takes its own copy).
    // One it does not hold goes in full, and counts as kept once the thread answers this task (the
    // pool counts it then, before the thread is given its next task: see WorkerPool's guardTaskPort).
    if (wire.version !== 0 && !wire.serialized) {
      if (thread.keptScopes.has(wire.version)) {
        task[SCOPE] = null;
      } else {
        task[SCOPE] = wire.scope;
        thread.sentScope = wire.version;
      }
    }
    // Every task carries the thread's buffer until the worker has answered one that did: a
    // first task that could not be posted (or that the worker refused) must not leave the
    // thread without it.
    if (!thread.bufferSent) task[TaskSlot.buffer] = thread.segment.slots.buffer;
    const deadline = table.deadlineOf(node.id);
    if (deadline !== undefined) {
      let extras = task[10] as Record<string, unknown> | null;
      if (extras === null) {
        extras = {};
        task[10] = extras;
      }
      extras.timeoutMs = Math.max(0, deadline - clock.now());
    }
    this.#o.track(node);
  }

  #fromResult(raw: unknown, node: RunNode): WorkerEnd {
    try {
      return this.#readResult(raw, node);
    } catch (error) {
      // What a worker sends must never throw here (this is every run's way back: a throw
      // would leave the run hanging and reject unhandled), whatever it holds: a cause
      // chain deeper than the checks' stack, say.
      return this.#malformed(node, `it cannot be read: ${error instanceof Error ? error.message : String(error)}`);
    }
  }

  // A worker that answers with something that is not a result is broken (or
  // hostile): a defect, and the thread does not run anything else.
  #malformed(node: RunNode, why: string): WorkerEnd {
    const thread = node.thread;
    if (thread !== undefined) this.#o.pool.recycle(thread, `it returned a malformed result (${why})`);
    return {
      end: {
        status: 'crashed',
        exitCode: null,
        error: new WorkerCrashedError(
          `the worker running ${node.agentId} returned a malformed result (${why}); it was recycled`,
          null,
        ),
      },
      usage: NO_USAGE,
      sent: 0,
    };
  }

  #readResult(raw: unknown, node: RunNode): WorkerEnd {
    const parsed = readResultOf(node.thread, raw) ?? decodeSubagentResult(raw);
    if (parsed.error !== undefined) return this.#malformed(node, parsed.error);
    const r = parsed.result;
    const events = r.events ?? NO_EVENTS;
    const usage = r.usage ?? NO_USAGE;
    const turns = r.turns;
    const sent = r.sent ?? 0;
    const tail = r.tail;
    switch (r.status) {
      case 'done':
        return {
          usage,
          sent,
          tail,
          end: { status: 'done', text: r.text, updates: r.updates ?? NO_UPDATES, events, turns },
        };
      case 'failed':
        return { usage, sent, tail, end: { status: 'failed', error: decodeError(r.error), events, turns } };
      case 'incomplete':
        return { usage, sent, tail, end: { status: 'incomplete', events, turns } };
      case 'cancelled':
        return { usage, sent, tail, end: { status: 'cancelled', reason: r.reason, forced: false } };
      case 'suspended':
        return { usage, sent, tail, end: { status: 'suspended', state: r.state, events, turns } };
    }
  }

  /** The run's task was rejected: killed on purpose, its thread died, or it could not be posted. */
  #fromRejection(error: unknown, node: RunNode): WorkerEnd {
    const kill = node.kill;
    // What the run spent before its thread died or was killed, as its worker noted it.
    const none = { usage: this.#o.table.usageOf(node.id) ?? NO_USAGE, sent: 0 };
    if (error === WITHDRAWN) {
      // Cancelled while it waited for a thread: it never started.
      return { ...none, end: { status: 'cancelled', reason: this.#o.table.reason(node.id) ?? 'user', forced: false } };
    }
    if (kill !== undefined) {
      if (kill.kind === 'lane-timeout') {
        const info = this.#o.table.laneInfo(node.id, kill.lane);
        const tool = info === undefined ? undefined : (node.agent.tools[info.tool]?.name ?? 'task');
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
    if (this.#o.pool.destroyed) return { ...none, end: { status: 'cancelled', reason: 'shutdown', forced: true } };
    const thread = node.thread;
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
            `the task of ${node.agentId} could not be sent to a worker: ${err.message}; channels, answers and resume states must be plain data of reasonable depth`,
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
        error: new WorkerCrashedError(`the worker running ${node.agentId} ${what}; the pool replaced it`, exitCode, {
          cause: thread.error ?? err,
        }),
      },
    };
  }

  /**
   * How a sealed scope crosses. A heavy one as bytes: serialized once per
   * scope, into a SharedArrayBuffer per thread it goes to (posting it copies
   * nothing; one buffer for all threads would let one rewrite what the others
   * decode) — structured clone would serialize the whole graph on this
   * thread on every hop. A lean one (the norm) as it is. A scope that can never change (`isDeepFrozen`)
   * gets a version, and its wire form is kept: a worker decodes or freezes
   * each version once and reuses it. One that can (it holds anything but
   * plain objects, arrays and primitives: a Map, a Date...) is looked at
   * afresh on every spawn and never versioned.
   */
  #scopeWire(scope: unknown): ScopeWire {
    if (scope === undefined) return NO_SCOPE;
    if (typeof scope !== 'object' || scope === null) return { scope, version: 0, serialized: false, copies: undefined };
    const known = this.#scopeWires.get(scope);
    if (known !== undefined) return known;
    if (!isDeepFrozen(scope)) {
      // It can change: what it holds now, serialized once (its size is never remembered).
      const encoded = serializedBytes(scope);
      return encoded.byteLength < SERIALIZED_SCOPE_MIN_BYTES
        ? { scope, version: 0, serialized: false, copies: undefined }
        : { scope: sharedCopy(encoded), version: 0, serialized: true, copies: undefined };
    }
    // A bound under the threshold settles it without serializing a lean scope;
    // a heavy one was measured when sealed, and the bytes made then are used.
    const wire: ScopeWire =
      serializedSizeAtMost(scope) < SERIALIZED_SCOPE_MIN_BYTES || serializedSize(scope) < SERIALIZED_SCOPE_MIN_BYTES
        ? { scope, version: ++this.#scopeVersions, serialized: false, copies: undefined }
        : // Kept here, never posted: each thread gets a copy (see ScopeWire.copies).
          { scope: serializedBytes(scope), version: ++this.#scopeVersions, serialized: true, copies: new WeakMap() };
    this.#scopeWires.set(scope, wire);
    return wire;
  }
}

/** Bits of the host features every worker run gets (approval is decided here, even when it is a denial). */
export const BASE_FEATURES: number = HostFeature.approval;
