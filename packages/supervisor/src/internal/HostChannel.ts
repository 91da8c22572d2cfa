import type { MessagePort } from 'node:worker_threads';
import { type Clock, TroupeError } from '@troupe/core';
import {
  encodeError,
  HostApprovalRequest,
  type HostCall,
  type HostCheckpoint,
  type HostEvent,
  HostOp,
  type HostTaskRequest,
  type HostTaskResult,
  parseHostCall,
  parseHostCheckpoint,
  parseHostEvents,
  parseHostTaskRequest,
} from '@troupe/core/internal';
import { mintCapability } from './capability.js';

/** What a host-channel call may do for the run its capability names. */
export interface HostRun {
  readonly agentId: string;
  readonly runId: string;
  approve(request: HostApprovalRequest): Promise<unknown>;
  /** `undefined`: nobody waits for the answer any more (the run was cancelled): no reply is posted. */
  task(request: HostTaskRequest): Promise<HostTaskResult | undefined>;
  events(events: readonly HostEvent[]): void;
  /** Save a turn durably; resolves once saved. */
  checkpoint(checkpoint: HostCheckpoint): Promise<unknown>;
  /** The run ended with work left running; `raw` is its encoded result. Returns what is wrong, if anything. */
  holding(raw: unknown): string | undefined;
}

/** How a capability resolves for a thread. */
export type HostLookup =
  | { readonly kind: 'run'; readonly run: HostRun }
  /** It named a run of this thread that has ended (late work of that run): refused, not hostile. */
  | {
      readonly kind: 'stale';
      readonly agentId: string;
      readonly runId: string;
      /** Nothing else runs on the thread: a late call of its own ended run, refused without an event. */
      readonly quiet: boolean;
    }
  /** It names nothing this supervisor issued to this thread. */
  | { readonly kind: 'unknown' };

/**
 * Whoever sends host calls on one channel: a worker thread of this process, or
 * (relayed) a worker host. Its flood window and its recycling are the
 * channel's to keep; its identity comes from how its messages arrived, never
 * from what it says.
 */
export interface HostPeer {
  /** The thread's id (a relay's own number for a worker host). */
  readonly id: number;
  /** The worker host it runs on, when it is not this process. */
  readonly host?: string | undefined;
  /** Why it is being recycled (nothing it sends counts any more), if it is. */
  recycled: string | undefined;
  /** Messages it sent in the current flood window, and when the window started. */
  floodCount: number;
  floodStart: number;
}

/** How the channel answers a call: posts `[seq, ok, value]` back to the peer it came from. */
export type HostReply = (message: unknown[]) => void;

/** A refused message, as the `host.refused` event reports it. */
export interface HostRefusal {
  readonly threadId: number;
  /** The worker host it came from, when it was relayed. */
  readonly host?: string | undefined;
  readonly reason: string;
  readonly op: number | undefined;
  readonly agentId: string | undefined;
  readonly runId: string | undefined;
  /** True when the thread that sent it is being recycled. */
  readonly recycled: boolean;
  readonly at: number;
}

/** Options of {@link HostChannel}. */
export interface HostChannelOptions<P extends HostPeer = HostPeer> {
  readonly clock: Clock;
  /** Which run a capability presented on `peer`'s channel is for. */
  readonly lookup: (capability: string, peer: P) => HostLookup;
  readonly recycle: (peer: P, reason: string) => void;
  readonly refused: (refusal: HostRefusal) => void;
  /**
   * Work a thread may send within a second before it counts as a flood
   * (default 50,000): each message counts one, and a batch counts each of
   * its events and model deltas.
   */
  readonly floodLimit?: number | undefined;
}

const FLOOD_WINDOW_MS = 1000;

/**
 * How long one thread's messages may hold this thread's event loop in one
 * turn before the rest wait for the next turn (see {@link HostChannel.bind}).
 * An honest worker's messages of a turn take a fraction of it.
 */
export const SLICE_MS = 5;

/**
 * The most questions one dispatch of a run may ask. A tool that returns
 * `pending` is done for that dispatch, and the run suspends at the end of
 * the turn: an honest run asks at most one question per call of its last
 * turn. Each question is a request the supervisor keeps until it is answered
 * or the run ends, so without a bound a worker could fill the supervisor's
 * memory at any rate under the flood limit.
 */
export const MAX_QUESTIONS_PER_DISPATCH = 1024;

/**
 * What one dispatch of a run has asked (a resumed run is a new dispatch,
 * with a new capability). An honest run asks the approval handler about a
 * call once and a question for a call once: a second one would open a
 * second request for the same call, and the first would outlive the run
 * (the supervisor keeps one request per call and withdraws that one when
 * the run ends).
 */
interface Asked {
  readonly capability: string;
  /** Requests opened: questions, and approvals the handler answered with `ask`. */
  count: number;
  /**
   * Calls the approval handler was asked about: `open` until it decides;
   * after an `ask`, the id of the request it opened (the call does not run:
   * the only question that can follow is that request itself, which the
   * worker passes on as the call's question); `decided` otherwise.
   */
  readonly approvals: Map<string, 'open' | 'decided' | { readonly requestId: unknown }>;
  /** Calls a question was asked for. */
  readonly questions: Set<string>;
  /**
   * The receipt the run's next checkpoint must present: minted when the
   * last one was taken, and revealed only in its reply (`undefined` before
   * its first). See the checkpoint case of {@link HostChannel}.
   */
  receipt: string | undefined;
}

function isAsk(decision: unknown): boolean {
  return typeof decision === 'object' && decision !== null && (decision as { decision?: unknown }).decision === 'ask';
}

/**
 * The supervisor's end of every worker's host channel: it serves the named
 * operations of {@link HostOp} and nothing else. Each message is parsed by
 * hand; its capability must name a run in flight on the very thread whose
 * port it came in on (the port was bound to that thread from the `Worker`
 * it came out of). Anything else — a malformed message, an unknown
 * operation, arguments that fail their schema, a capability this thread was
 * never given, a flood (counted in messages, events and deltas as they
 * arrive), more questions than one dispatch can ask or a second one for the
 * same call, a checkpoint of a run sent before its last one was answered —
 * is refused with a typed error to the worker (when
 * it asked for a reply), a `host.refused` event, and the thread is
 * recycled. A late message of a run that has ended is refused without
 * recycling. Nothing a worker sends runs code here beyond these handlers.
 */
export class HostChannel<P extends HostPeer = HostPeer> {
  readonly #o: HostChannelOptions<P>;
  readonly #floodLimit: number;
  /** What each run asked under its current capability (a resumed run starts again). */
  readonly #asked = new WeakMap<HostRun, Asked>();
  #refusals = 0;

  constructor(options: HostChannelOptions<P>) {
    this.#o = options;
    this.#floodLimit = options.floodLimit ?? 50_000;
  }

  /** Messages refused so far. */
  get refusals(): number {
    return this.#refusals;
  }

  /**
   * Serve the channel of `peer` (a worker thread) on `port`, one slice of its
   * messages per turn of this thread's event loop. Returns what serves one of
   * its messages at once (for the pool to read what a thread that exited left
   * on its port).
   *
   * A port hands its listener every message queued when it woke, one after
   * another, without returning to the loop: a worker that posts faster than
   * they are served (20,000 well-formed event batches, under the flood limit)
   * would hold this thread for hundreds of milliseconds — every timer late,
   * a `close({ timeoutMs })` too. Once a slice has taken {@link SLICE_MS}, the
   * port is stopped (its last `message` listener removed: the rest stays
   * queued, in order) and started again after the loop has turned. Each
   * message is counted against the flood window as it is read.
   */
  bind(peer: P, port: MessagePort): (raw: unknown) => void {
    const reply: HostReply = (message) => post(port, message);
    const serve = (raw: unknown) => this.receive(peer, raw, reply);
    /** When the slice of this turn started; `undefined` until its first message. */
    let slice: number | undefined;
    const listen = () => {
      port.on('message', onMessage);
      // The port must not keep the process alive (the pool decides when threads end).
      port.unref();
    };
    const onMessage = (raw: unknown) => {
      // (A slice measures how long this thread has been busy: not a time anyone injects.)
      if (slice === undefined) {
        slice = performance.now();
        setImmediate(() => {
          slice = undefined;
        });
      }
      serve(raw);
      if (performance.now() - slice > SLICE_MS && peer.recycled === undefined) {
        port.off('message', onMessage);
        // (After the slice's own reset: immediates run in the order they were set.)
        setImmediate(() => {
          if (peer.recycled === undefined) listen();
        });
      }
    };
    // A message this thread cannot deserialize (nested deeper than its stack allows, a worker's
    // being larger) never arrives as one: refused all the same, never silently lost.
    port.on('messageerror', (error: Error) => {
      if (peer.recycled !== undefined) return;
      this.#refuse(peer, reply, undefined, `a message that cannot be read here (${error.message})`, true);
    });
    listen();
    return serve;
  }

  /**
   * Serve one message `raw` that `peer` sent (as it arrived: nothing about it is trusted), and
   * answer it through `reply`. A relay calls this for each call a worker host relays.
   */
  receive(peer: P, raw: unknown, reply: HostReply): void {
    const thread = peer;
    const port = reply;
    if (thread.recycled !== undefined) return;
    const now = this.#o.clock.now();
    if (now - thread.floodStart > FLOOD_WINDOW_MS) {
      thread.floodStart = now;
      thread.floodCount = 0;
    }
    if (this.#charge(thread, 1)) {
      this.#refuse(thread, port, replySeq(raw), this.#floodReason(), true);
      return;
    }
    const call = parseHostCall(raw);
    if (typeof call === 'string') {
      this.#refuse(thread, port, replySeq(raw), call, true);
      return;
    }
    const found = this.#o.lookup(call.capability, thread);
    if (found.kind === 'unknown') {
      this.#refuse(thread, port, call, 'a capability this supervisor did not give this thread', true);
      return;
    }
    if (found.kind === 'stale') {
      this.#refuse(thread, port, call, `run ${found.agentId} has ended`, false, found, found.quiet);
      return;
    }
    this.#serve(thread, port, call, found.run);
  }

  #serve(thread: P, port: HostReply, call: HostCall, run: HostRun): void {
    switch (call.op) {
      case HostOp.approve: {
        const parsed = HostApprovalRequest.safeParse(call.payload);
        if (!parsed.success) {
          this.#refuse(thread, port, call, 'a malformed approval request', true, run);
          return;
        }
        const asked = this.#dispatch(run, call.capability);
        const toolCallId = parsed.data.toolCallId;
        if (asked.approvals.has(toolCallId)) {
          this.#refuse(thread, port, call, `a second approval of call ${toolCallId} in one dispatch`, true, run);
          return;
        }
        if (asked.questions.has(toolCallId)) {
          // A call asks its question after it ran, and it runs after its approval.
          this.#refuse(thread, port, call, `an approval of call ${toolCallId} after its question`, true, run);
          return;
        }
        asked.approvals.set(toolCallId, 'open');
        const decided = run.approve(parsed.data).then((decision) => {
          if (isAsk(decision)) {
            // An `ask` opened a request: it counts as a question.
            asked.approvals.set(toolCallId, { requestId: (decision as { requestId?: unknown }).requestId });
            if (++asked.count > MAX_QUESTIONS_PER_DISPATCH) {
              this.#refuse(thread, port, undefined, this.#questionsReason(), true, run);
            }
          } else asked.approvals.set(toolCallId, 'decided');
          return decision;
        });
        this.#answer(port, call.seq, decided);
        return;
      }
      case HostOp.task: {
        const parsed = parseHostTaskRequest(call.payload);
        if (parsed === undefined) {
          this.#refuse(thread, port, call, 'a malformed task request', true, run);
          return;
        }
        this.#answer(port, call.seq, run.task(parsed), true);
        return;
      }
      case HostOp.events: {
        const events = parseHostEvents(call.payload);
        if (typeof events === 'string') {
          this.#refuse(thread, port, call, `a malformed event batch: ${events}`, true, run);
          return;
        }
        // The message counted one; its events and deltas count too (a batch of 512
        // questions costs 512 requests, not one message).
        let items = events.length - 1;
        let asked: Asked | undefined;
        for (const e of events) {
          if (e[0] === 'd') items += e[1].length;
          else if (e[0] === 'q') {
            asked ??= this.#dispatch(run, call.capability);
            if (asked.questions.has(e[1])) {
              this.#refuse(thread, port, call, `a second question for call ${e[1]} in one dispatch`, true, run);
              return;
            }
            const approval = asked.approvals.get(e[1]);
            asked.questions.add(e[1]);
            if (approval === undefined || approval === 'decided') asked.count++;
            else if (approval === 'open' || approval.requestId !== e[2].id) {
              // Undecided, or a person is asked about it: the call has not run, and has no question of its own.
              this.#refuse(thread, port, call, `a question for call ${e[1]}, which waits on its approval`, true, run);
              return;
            }
            // (Else it is the approval's own request, passed on by the worker: counted with the `ask`.)
          }
        }
        if (items > 0 && this.#charge(thread, items)) {
          this.#refuse(thread, port, call, this.#floodReason(), true, run);
          return;
        }
        if (asked !== undefined && asked.count > MAX_QUESTIONS_PER_DISPATCH) {
          this.#refuse(thread, port, call, this.#questionsReason(), true, run);
          return;
        }
        run.events(events);
        return;
      }
      case HostOp.checkpoint: {
        const parsed = parseHostCheckpoint(call.payload);
        if (typeof parsed === 'string') {
          this.#refuse(thread, port, call, `a malformed checkpoint: ${parsed}`, true, run);
          return;
        }
        // The run's loop awaits each checkpoint before it goes on: an honest worker has one in
        // flight, and presents the receipt the last one was answered with. One sent without
        // waiting for that answer cannot know it (it is minted here, revealed in the reply): it
        // is refused as it arrives, before anything is saved, whenever the supervisor reads it —
        // served one after another, each a durable write, a stream of them held this thread for
        // seconds. (Seen from here alone, a store that saves at once answers each before the
        // next is read: only the receipt tells when the worker sent it.)
        const asked = this.#dispatch(run, call.capability);
        if (parsed.receipt !== asked.receipt) {
          this.#refuse(
            thread,
            port,
            call,
            'a second checkpoint before the first was answered (it does not present the receipt of the last one)',
            true,
            run,
          );
          return;
        }
        const receipt = mintCapability();
        asked.receipt = receipt;
        this.#answer(
          port,
          call.seq,
          run.checkpoint(parsed).then(() => receipt),
        );
        return;
      }
      case HostOp.holding: {
        let wrong: string | undefined;
        try {
          wrong = run.holding(call.payload);
        } catch (error) {
          // Reading a result must not throw out of this handler (an uncaught exception on
          // the supervisor thread) whatever it holds: a cause chain deeper than the
          // check's stack, say. (Only the reading is guarded: a host's event listener that
          // throws is the host's error, not the worker's.)
          wrong = `it cannot be read (${error instanceof Error ? error.message : String(error)})`;
        }
        if (wrong !== undefined) this.#refuse(thread, port, call, `a malformed held result: ${wrong}`, true, run);
        return;
      }
      default:
        call.op satisfies never;
    }
  }

  // Count `n` against the thread's flood window; true once it is over the limit.
  #charge(thread: P, n: number): boolean {
    thread.floodCount += n;
    return thread.floodCount > this.#floodLimit;
  }

  #floodReason(): string {
    return `a flood: over ${this.#floodLimit} messages, events and deltas within a second`;
  }

  #questionsReason(): string {
    return `over ${MAX_QUESTIONS_PER_DISPATCH} questions in one dispatch of a run`;
  }

  // What `run` asked under `capability` (its current dispatch).
  #dispatch(run: HostRun, capability: string): Asked {
    let asked = this.#asked.get(run);
    if (asked === undefined || asked.capability !== capability) {
      asked = { capability, count: 0, approvals: new Map(), questions: new Set(), receipt: undefined };
      this.#asked.set(run, asked);
    }
    return asked;
  }

  // Post what `value` settles with as the reply to `seq`. Only a task's `undefined` posts nothing
  // (nobody waits for it any more: its run was cancelled). Any other value goes back as it is, an
  // approval handler's `undefined` too: the worker's executor denies what is not a decision, and
  // says so — posting nothing left the call waiting for ever.
  #answer(reply: HostReply, seq: number, value: Promise<unknown>, noReplyWhenUndefined = false): void {
    value.then(
      (v) => {
        if (v !== undefined || !noReplyWhenUndefined) reply([seq, 1, v]);
      },
      (error: unknown) => reply([seq, 0, encodeError(error)]),
    );
  }

  #refuse(
    thread: P,
    port: HostReply,
    call: HostCall | number | undefined,
    reason: string,
    hostile: boolean,
    run?: { readonly agentId: string; readonly runId: string },
    quiet = false,
  ): void {
    this.#refusals++;
    const seq = typeof call === 'number' ? call : (call?.seq ?? 0);
    if (seq > 0) {
      port([
        seq,
        0,
        encodeError(new TroupeError(`the host channel refused the call: ${reason}`, { code: 'ERR_HOST_REFUSED' })),
      ]);
    }
    if (hostile) this.#o.recycle(thread, `it sent ${reason} on its host channel`);
    if (quiet) return;
    this.#o.refused({
      threadId: thread.id,
      host: thread.host,
      reason,
      op: typeof call === 'object' ? call.op : undefined,
      agentId: run?.agentId,
      runId: run?.runId,
      recycled: hostile,
      at: this.#o.clock.now(),
    });
  }
}

// The sequence number of a message that failed its parse, to refuse it by reply when it asked for one.
function replySeq(raw: unknown): number {
  if (!Array.isArray(raw)) return 0;
  const seq: unknown = raw[1];
  return typeof seq === 'number' && Number.isSafeInteger(seq) && seq > 0 ? seq : 0;
}

function post(port: MessagePort, message: unknown[]): void {
  try {
    port.postMessage(message);
  } catch (error) {
    if (message[1] !== 1) return; // the port closed: the worker is gone or recycled
    // A value that cannot cross (an approval handler returned a function, say): the call fails instead.
    try {
      port.postMessage([
        message[0],
        0,
        encodeError(
          new TroupeError(`the supervisor's answer cannot cross to the worker: ${(error as Error).message}`, {
            code: 'ERR_NOT_CLONEABLE',
          }),
        ),
      ]);
    } catch {
      // The port closed.
    }
  }
}
