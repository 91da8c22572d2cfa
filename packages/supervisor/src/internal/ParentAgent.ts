import { AsyncResource } from 'node:async_hooks';
import {
  type Agent,
  type AgentId,
  addUsage,
  CancelledError,
  type CancelReason,
  type Clock,
  ClosedError,
  isTroupeError,
  type LoopState,
  type ModelDelta,
  NO_USAGE,
  type Request,
  type Scope,
  subtractUsage,
  TroupeError,
  totalUsage,
  type Usage,
} from '@troupe/core';
import { abandonPendingTurn } from '@troupe/core/internal';
import type { EventEmitter } from 'eventemitter3';
import type {
  AgentHandle,
  AgentReply,
  AgentSnapshot,
  AgentStatus,
  StreamChunk,
  StreamOptions,
} from '../AgentHandle.js';
import type { Durability } from '../persistence/Durability.js';
import type { RunStatus } from '../persistence/Persistence.js';
import type { AgentStateEnvelope } from '../persistence/StateEnvelope.js';
import { admitRestart, type RestartPolicy } from '../RestartPolicy.js';
import type { RestoredRequest, RestoredRun, RunTree } from '../RunTree.js';
import type { SupervisorEvents } from '../SupervisorEvents.js';
import { AgentStream, type StreamSource } from './AgentStream.js';
import {
  ConversationSaver,
  conversationEnvelope,
  type InterruptedMessage,
  messageStarter,
  resumedChildUsage,
  withMessageUsage,
} from './ConversationSaver.js';
import { checkSignal } from './checkSignal.js';
import { type Job, Mailbox, newJob, refusal } from './Mailbox.js';
import { emitMessageOutcome, type MessageRef } from './messageEvents.js';
import type { RootOwner, RunNode, SavedConversation } from './RunNode.js';
import { totalOf } from './RunNode.js';

/** What a parent agent borrows from its supervisor. */
export interface ParentAgentDeps {
  readonly tree: RunTree;
  readonly clock: Clock;
  readonly events: EventEmitter<SupervisorEvents>;
  /** What is saved, and where (none: nothing is). */
  readonly durability: Durability | undefined;
  readonly restart: RestartPolicy;
  readonly mailboxSize: number;
  /** True once the supervisor refuses new work. */
  closed(): boolean;
  /** The agent has nothing running, queued or waiting (the supervisor may stop holding it). */
  idle(agent: ParentAgent): void;
  /** The agent got work (the supervisor holds it while it has some). */
  busy(agent: ParentAgent): void;
  /** The agent stopped because its copy is stale (see {@link ParentAgent.takenElsewhere}): let go of it. */
  stale(agent: ParentAgent): void;
}

/** The reply each ended root run was settled with (a second settle returns it; it goes with its run, not its agent). */
const REPLIES = new WeakMap<RunNode, AgentReply>();

/**
 * A parent agent: an actor on the supervisor thread with a bounded mailbox.
 * One message at a time; each message is a root run of the supervisor's run
 * tree, and this actor keeps the conversation between messages: its state,
 * its restarts, what it saved.
 */
export class ParentAgent implements AgentHandle, RootOwner, StreamSource {
  readonly id: AgentId;
  readonly name: string;
  readonly conversationId: string;
  readonly #agent: Agent;
  readonly #scope: Scope;
  readonly #toolContext: Readonly<Record<string, unknown>>;
  readonly #deps: ParentAgentDeps;
  readonly #mailbox: Mailbox;
  /** When it restarted, within the policy's period (made on the first restart). */
  #restarts: number[] | undefined;
  #state: LoopState;
  #checkpoint: LoopState;
  #status: AgentStatus = 'idle';
  /** Set while a message a crash interrupted waits for `resume()`. */
  #interrupted: InterruptedMessage | undefined;
  /** The run of the current message (running or suspended). */
  #root: RunNode | undefined;
  /** The input of the current message, until it is saved. */
  #unsaved: string | undefined;
  #children: number;
  /** Who waits for it to be idle (made on the first wait: most agents never have one). */
  #idleWaiters: (() => void)[] | undefined;

  constructor(
    agent: Agent,
    init: {
      readonly id: AgentId;
      readonly conversationId: string;
      readonly scope: Scope;
      readonly toolContext: Readonly<Record<string, unknown>>;
      readonly state: LoopState;
      readonly children: number;
      /** The revision of its saved envelope (0: none saved; undefined: the store does not fence). */
      readonly revision?: number | undefined;
    },
    deps: ParentAgentDeps,
  ) {
    this.id = init.id;
    this.name = agent.name;
    this.conversationId = init.conversationId;
    this.#agent = agent;
    this.#scope = init.scope;
    this.#toolContext = init.toolContext;
    this.#deps = deps;
    this.#mailbox = new Mailbox(deps.mailboxSize);
    this.#state = init.state;
    this.#checkpoint = init.state;
    this.#children = init.children;
    if (deps.durability !== undefined) {
      this.#saved = { agentId: init.id, conversationId: init.conversationId, revision: init.revision };
      this.#saver = new ConversationSaver(deps.durability, deps.events, deps.clock, init.id);
    }
  }

  /** Where its runs are saved (none without a store), with its envelope's revision. */
  readonly #saved: SavedConversation | undefined;
  /** Saves its conversation (none without a store). */
  readonly #saver: ConversationSaver | undefined;

  get status(): AgentStatus {
    return this.#status;
  }

  /** The first open question of the current message, when it is suspended. */
  get pendingRequest(): { readonly request: Request; readonly path: readonly AgentId[] } | undefined {
    const root = this.#root;
    return root === undefined || root.phase !== 'suspended' ? undefined : this.#deps.tree.requests.firstOpen(root);
  }

  /** The agent's scope (a restore and an answer from the store use it). */
  get scope(): Scope {
    return this.#scope;
  }

  /**
   * Resume a restored conversation that was suspended: its root run (and the
   * suspended runs under it), suspended, with their questions open again
   * under the ids the host knows.
   */
  restoreSuspended(
    run: { readonly runId: string | undefined; readonly attempt: number; readonly state: LoopState },
    requests: readonly RestoredRequest[],
    descendants: readonly RestoredRun[] = [],
  ): RunNode {
    this.#state = run.state;
    const root = this.#deps.tree.restoreRoot(
      {
        kind: 'message',
        agent: this.#agent,
        agentId: this.id,
        scope: this.#scope,
        toolContext: this.#toolContext,
        owner: this,
        state: this.#state,
        input: '',
        nextChild: this.#children,
        conversation: this.#saved,
        runId: run.runId as never,
        attempt: run.attempt,
      },
      requests,
      descendants,
      // What its children spent in the message's completed turns: in its state, not in the conversation's before it.
      subtractUsage(run.state.childUsage ?? NO_USAGE, this.#checkpoint.childUsage ?? NO_USAGE),
    );
    this.#root = root;
    // Something of it runs again at once (a child that did not come back fails its task call).
    if (root.active > 0) this.#settleLater(root);
    else this.#status = 'suspended';
    return root;
  }

  /** A restored message runs again with nobody waiting for its reply (an answer saved before a crash): it is saved when quiet. */
  #settleLater(root: RunNode): void {
    this.#status = 'running';
    void this.#deps.tree.whenQuiet(root);
  }

  /** Deliver answers the store took before a crash (their runs never resumed). */
  redeliver(answers: readonly { readonly id: string; readonly answer: import('@troupe/core').Answer }[]): void {
    const root = this.#root;
    if (root === undefined || answers.length === 0) return;
    for (const a of answers) this.#deps.tree.requests.redeliver(a.id, { ...a.answer, id: a.id });
    if (root.active > 0) this.#settleLater(root);
  }

  /** Number its next subagents from at least `n` (a restore: ids given before a crash are not given again). */
  reserveChildren(n: number): void {
    this.#children = Math.max(this.#children, n);
  }

  /** A restored conversation whose message a crash interrupted: `resume()` finishes it. */
  restoreInterrupted(message: InterruptedMessage): void {
    this.#interrupted = message;
    this.#status = 'interrupted';
  }

  /**
   * Finish the message a crash interrupted, from its last saved turn: its
   * tool calls that had started and never committed are not run again — the
   * model gets an `ERR_INTERRUPTED` error result for each — unless their tool
   * is `idempotent`; the rest runs as usual. Resolves with the message's reply.
   */
  resume(options: { readonly signal?: AbortSignal } = {}): Promise<AgentReply> {
    const message = this.#interrupted;
    if (message === undefined || this.#status !== 'interrupted') {
      return Promise.reject(
        new TroupeError(`agent ${this.id} has no interrupted message to resume (it is ${this.#status})`, {
          code: 'ERR_INVALID_ARGUMENT',
        }),
      );
    }
    if (this.#deps.closed()) return Promise.reject(new ClosedError('the supervisor is closed: create a new one'));
    let signal: AbortSignal | undefined;
    try {
      signal = checkSignal(options?.signal, 'resume({ signal })');
    } catch (error) {
      return Promise.reject(error);
    }
    if (signal?.aborted) return Promise.reject(new CancelledError('user', 'the resume was aborted before it started'));
    this.#interrupted = undefined;
    this.#status = 'idle';
    return new Promise<AgentReply>((resolve, reject) => {
      const job = newJob('', signal, undefined, message, resolve, reject);
      this.#watch(job);
      this.#mailbox.pushFirst(job);
      this.#deps.busy(this);
      this.#pump();
    });
  }

  send(message: string, options: { readonly signal?: AbortSignal } = {}): Promise<AgentReply> {
    return this.sendStreaming(message, options?.signal, undefined);
  }

  /** `send`, with the message's deltas reported to `onDeltas` (what `stream` reads). */
  sendStreaming(
    message: string,
    signal: AbortSignal | undefined,
    onDeltas: ((node: RunNode, deltas: readonly ModelDelta[]) => void) | undefined,
  ): Promise<AgentReply> {
    const refused = this.#refuse(message, signal);
    if (refused !== undefined) return Promise.reject(refused);
    return new Promise<AgentReply>((resolve, reject) => {
      const job = newJob(message, signal, onDeltas, undefined, resolve, reject);
      this.#watch(job);
      if (this.#status !== 'idle' || this.#mailbox.size > 0) job.context = AsyncResource.bind((start) => start());
      this.#mailbox.push(job);
      this.#deps.busy(this);
      if (this.#status === 'suspended') this.#checkCopy();
      this.#pump();
    });
  }

  /** A look at the store, while this copy waits on a question, for whether another process moved on. */
  #checking: Promise<void> | undefined;

  // A message queued behind a suspension waits for its answer. With a store other processes share,
  // the answer may be taken there: this copy is then behind what is saved, and what it queues would
  // wait for ever. Looked up as a message is queued (once at a time); a stale copy is let go, and
  // what waits in its mailbox is refused with why. A store that cannot answer now changes nothing.
  #checkCopy(): void {
    const root = this.#root;
    const durability = this.#deps.durability;
    if (this.#checking !== undefined || root === undefined || durability === undefined || !durability.durable) return;
    const asked = this.#deps.tree.requests
      .openRequests()
      .filter((r) => r.agentId === this.id)
      .map((r) => r.request.id);
    const done = () => {
      this.#checking = undefined;
    };
    this.#checking = durability.behind(root, asked).then((why) => {
      done();
      if (why === undefined || this.#root !== root || this.#status !== 'suspended') return;
      const stale = `this copy of conversation ${this.conversationId} is behind what is saved (${why})`;
      const error = new TroupeError(
        `agent ${this.id}: ${stale}: the message was not sent; startAgent it again to load what is saved, then send`,
        { code: 'ERR_STORE_FENCED' },
      );
      this.#mailbox.rejectAll(() => error);
      this.#deps.tree.forget(root);
      this.#root = undefined;
      this.#stopNow(`${stale}; startAgent it again to load what is saved`);
      this.#deps.stale(this);
    }, done);
  }

  // Aborting a job's signal drops it from the mailbox, or cancels it once it runs.
  #watch(job: Job): void {
    this.#mailbox.watch(
      job,
      (dropped) => {
        if (dropped.resume !== undefined) this.restoreInterrupted(dropped.resume);
      },
      (running) => {
        if (this.#current === running && this.#root !== undefined) this.#deps.tree.cancel(this.#root, 'user');
      },
    );
  }

  /** Why a message is refused before it is queued, if it is. */
  #refuse(message: unknown, signal: AbortSignal | undefined): Error | undefined {
    if (this.#deps.closed()) return new ClosedError('the supervisor is closed: create a new one');
    return refusal(this.id, this.#status, this.#mailbox, message, signal);
  }

  /**
   * Send a message and read its model's tokens as they are written, from
   * this agent and every subagent under it, in order per run; the iterator
   * ends when the message's reply is ready (`stream.reply`).
   */
  stream(
    message: string,
    options: StreamOptions = {},
  ): AsyncIterableIterator<StreamChunk> & { readonly reply: Promise<AgentReply> } {
    return new AgentStream(this, message, options ?? {});
  }

  #current: Job | undefined;

  #pump(): void {
    if (this.#status !== 'idle') return;
    const job = this.#mailbox.shift();
    if (job === undefined) {
      this.#wakeIdleWaiters();
      this.#deps.idle(this);
      return;
    }
    this.#current = job;
    this.#status = 'running';
    const d = this.#deps.durability;
    const durable = d?.durable === true;
    const resume = job.resume;
    // A durable store saves the input before anything runs; any other store saves it with the reply.
    this.#unsaved = durable || resume !== undefined ? undefined : job.input;
    const from = resume?.state ?? this.#state;
    const beforeRun =
      durable && d !== undefined
        ? messageStarter(d, resume === undefined ? job.input : undefined, from, (root) =>
            this.#envelope('running', root, from),
          )
        : undefined;
    let root: RunNode;
    try {
      const start = (): RunNode =>
        this.#deps.tree.startRoot({
          kind: 'message',
          agent: this.#agent,
          agentId: this.id,
          scope: this.#scope,
          toolContext: this.#toolContext,
          owner: this,
          state: resume?.state ?? this.#state,
          input: resume === undefined ? job.input : '',
          nextChild: this.#children,
          onDeltas: job.onDeltas,
          conversation: this.#saved,
          beforeRun,
          runId: resume?.runId as never,
          attempt: resume?.attempt,
          interrupted:
            resume === undefined
              ? undefined
              : { started: new Set(resume.started.map((c) => c.toolCallId)), lost: resume.lost },
          childUsage: resume === undefined ? undefined : resumedChildUsage(resume, this.#checkpoint),
        });
      root = job.context === undefined ? start() : job.context(start);
    } catch (error) {
      this.#status = resume === undefined ? 'idle' : 'interrupted';
      if (resume !== undefined) this.#interrupted = resume;
      this.#current = undefined;
      job.detach?.();
      job.reject(error instanceof Error ? error : new Error(String(error)));
      this.#pump();
      return;
    }
    if (resume !== undefined) d?.adoptStarted(root, resume.started);
    this.#root = root;
    void this.#deps.tree.whenQuiet(root).then((reply) => {
      job.detach?.();
      if (reply instanceof Error) job.reject(reply);
      else job.resolve(reply as AgentReply);
    });
  }

  resumed(root: RunNode): void {
    // Something of a suspended message runs again: an answer (whose caller waits for the reply),
    // or a cancel deep in its tree that lets a run there go on (nobody waits): either way the
    // message is saved and reported when its tree is quiet again.
    if (this.#status === 'suspended' && root === this.#root) this.#settleLater(root);
  }

  /** The message's tree is quiet: keep its state, save it, and tell every waiter. */
  async settle(root: RunNode): Promise<AgentReply> {
    const { clock, events } = this.#deps;
    const at = clock.now();
    this.#children = Math.max(this.#children, root.nextChild);
    // The run's loop carries the conversation's tokens so far: the message's are what it added
    // to the state it started from.
    const start = this.#checkpoint;
    const usage = subtractUsage(root.usage, start.usage);
    const total = subtractUsage(totalOf(root), start.usage);
    const ref: MessageRef = { agentId: this.id, runId: root.id, path: root.path, usage, totalUsage: total, at };
    if (root.phase !== 'ended') {
      // Suspended throughout: keep the state to resume from; the reply names the first open question.
      this.#state = root.state as LoopState;
      this.#status = this.#status === 'stopped' ? 'stopped' : 'suspended';
      const first = this.#deps.tree.requests.firstOpen(root);
      emitMessageOutcome(events, ref, { status: 'suspended', requestId: first?.request.id ?? '' });
      // The run tree saved the runs and their questions; this saves the conversation.
      const failed = await this.#save(root, 'suspended', undefined, undefined);
      if (this.#saver?.abandonedWith !== undefined)
        return this.#givenUp(this.#saver?.abandonedWith as Error, usage, total);
      if (failed !== undefined && isTroupeError(failed, 'ERR_STORE_FENCED')) {
        this.#deps.tree.forget(root);
        this.#root = undefined;
        this.#current = undefined;
        return this.#fencedOut(failed, usage, total);
      }
      // A suspended agent counts as idle (a close() drains without waiting on a person).
      this.#wakeIdleWaiters();
      if (first === undefined) {
        return {
          status: 'suspended',
          request: { id: '', kind: 'none', prompt: '' },
          path: root.path,
          usage,
          totalUsage: total,
        };
      }
      return { status: 'suspended', request: first.request, path: first.path, usage, totalUsage: total };
    }
    if (this.#root !== root) {
      // Reported already (an ended root is settled once).
      return REPLIES.get(root) ?? { status: 'cancelled', reason: 'user', usage, totalUsage: total };
    }
    this.#root = undefined;
    this.#current = undefined;
    const end = root.end;
    let state = root.state ?? this.#state;
    if (state.pending !== undefined)
      state = abandonPendingTurn(state, end?.status === 'cancelled' ? end.reason : 'user', clock);
    let reply: AgentReply;
    // destroy() leaves what was saved as it was: the next supervisor resumes from there (a close()
    // or stop() that cut the message saves it cancelled, as the host is told).
    const shutdown = end?.status === 'cancelled' && end.reason === 'shutdown' && this.#deps.tree.leavesSaved;
    const saved = (status: 'idle' | 'failed', run: RunStatus, text: string | undefined): Promise<Error | undefined> =>
      shutdown ? Promise.resolve(undefined) : this.#save(root, status, run, text, state);
    switch (end?.status) {
      case 'done':
      case 'incomplete':
      case 'cancelled': {
        // Saved with the message's tokens, its subagents' too: a cancel's abandoned turn drops the
        // calls whose children had ended, and with them what those children spent.
        state = withMessageUsage(state, start, usage, total);
        const failed = await saved('idle', end.status, end.status === 'done' ? end.text : undefined);
        if (this.#saver?.abandonedWith !== undefined) {
          reply = this.#givenUp(this.#saver?.abandonedWith as Error, usage, total);
          break;
        }
        if (failed !== undefined) {
          // Not saved: the conversation stays where the store has it, and the caller learns why.
          reply = isTroupeError(failed, 'ERR_STORE_FENCED')
            ? this.#fencedOut(failed, usage, total)
            : this.#notSaved(failed, usage, total);
          break;
        }
        // Tokens spent are kept, also those of children a cancel cut off before they reported.
        this.#keep(state);
        if (end.status === 'done') {
          emitMessageOutcome(events, ref, { status: 'done', turns: state.turns });
          reply = { status: 'done', text: end.text, turns: state.turns, usage, totalUsage: total };
        } else if (end.status === 'incomplete') {
          emitMessageOutcome(events, ref, { status: 'incomplete', turns: state.turns });
          reply = { status: 'incomplete', turns: state.turns, usage, totalUsage: total };
        } else {
          emitMessageOutcome(events, ref, { status: 'cancelled', reason: end.reason });
          reply = { status: 'cancelled', reason: end.reason, usage, totalUsage: total };
        }
        break;
      }
      default: {
        // A failure of its run (a crash cannot happen here: a parent runs on this thread).
        const error =
          end?.status === 'failed' || end?.status === 'crashed'
            ? end.error
            : new Error('the run ended without an outcome');
        // A defect (of the library or of a callback it trusted) is reported once and does not
        // count against the restart intensity; a failure does.
        if (isTroupeError(error, 'ERR_STORE_FENCED')) {
          // Refused as the message started: nothing of it ran.
          events.emit('persistence.failed', { agentId: this.id, runId: root.id, error, at });
          reply = this.#fencedOut(error, usage, total);
          break;
        }
        const defect = (error as { code?: unknown }).code === 'ERR_INTERNAL';
        emitMessageOutcome(events, ref, { status: 'failed', kind: defect ? 'defect' : 'failure', error });
        this.#restarts ??= [];
        const restarted = defect || admitRestart(this.#deps.restart, this.#restarts, at);
        // One-for-one: only this agent restarts, from its last good state — with the tokens the
        // failed message spent.
        this.#checkpoint = withMessageUsage(this.#checkpoint, start, usage, total);
        this.#state = this.#checkpoint;
        this.#unsaved = undefined;
        // The run is saved as failed; the conversation, as it was before the message.
        await this.#save(root, 'failed', 'failed', undefined, this.#checkpoint);
        if (this.#saver?.abandonedWith !== undefined) {
          reply = this.#givenUp(this.#saver?.abandonedWith as Error, usage, total);
          break;
        }
        if (restarted) {
          this.#status = 'idle';
          events.emit('agent.restarted', { agentId: this.id, restarts: this.#restarts?.length ?? 0, at });
        } else {
          this.#stopNow(
            `restarted ${this.#deps.restart.maxRestarts} times within ${this.#deps.restart.periodMs} ms and failed again: ${error.message}`,
          );
        }
        reply = { status: 'failed', error, restarted, usage, totalUsage: total };
      }
    }
    REPLIES.set(root, reply);
    queueMicrotask(() => this.#pump());
    return reply;
  }

  #wakeIdleWaiters(): void {
    const waiters = this.#idleWaiters;
    if (waiters === undefined) return;
    this.#idleWaiters = undefined;
    for (const resolve of waiters) resolve();
  }

  // The message's reply could not be saved: the agent goes on from its last saved state.
  #notSaved(error: Error, usage: AgentReply['usage'], totalUsage: AgentReply['totalUsage']): AgentReply {
    this.#state = this.#checkpoint;
    this.#unsaved = undefined;
    if (this.#status !== 'stopped') this.#status = 'idle';
    return { status: 'failed', error, restarted: true, usage, totalUsage };
  }

  /**
   * The store refused a save of this agent's conversation (`ERR_STORE_FENCED`): another
   * process (or another copy) saved it since this one loaded it, so what this agent holds is
   * stale. It stops without saving anything more and is let go; a new `startAgent` loads what
   * is saved. Not a failure of the agent: no restart is spent.
   */
  #fencedOut(error: Error, usage: AgentReply['usage'], totalUsage: AgentReply['totalUsage']): AgentReply {
    this.#state = this.#checkpoint;
    this.#unsaved = undefined;
    this.#stopNow(
      `another process saved conversation ${this.conversationId} since this copy loaded it; startAgent it again to load what is saved`,
    );
    this.#deps.stale(this);
    return { status: 'failed', error, restarted: false, usage, totalUsage };
  }

  #keep(state: LoopState): void {
    this.#state = state;
    this.#checkpoint = state;
    if (this.#status !== 'stopped') this.#status = 'idle';
  }

  #envelope(status: AgentStateEnvelope['status'], root: RunNode | undefined, state: LoopState): AgentStateEnvelope {
    return conversationEnvelope({
      agentId: this.id,
      conversationId: this.conversationId,
      agentName: this.name,
      status,
      root: root !== undefined && root.phase === 'suspended' ? root : undefined,
      runId: root?.id,
      state,
      before: this.#checkpoint,
      children: Math.max(this.#children, root?.nextChild ?? 0),
      tree: this.#deps.tree,
      at: this.#deps.clock.now(),
    });
  }

  /**
   * Save the conversation as the message left it, in one transaction: the
   * envelope, the messages to show (the input, unless saved when it started;
   * the answer), and the root run's final row. Resolves with the store's
   * error when it failed (also reported as `persistence.failed`), or with
   * the abandon's error at once when its owner gave up on it (see abandon).
   */
  async #save(
    root: RunNode,
    status: 'idle' | 'suspended' | 'failed',
    run: RunStatus | undefined,
    text: string | undefined,
    state: LoopState = this.#state,
  ): Promise<Error | undefined> {
    const saver = this.#saver;
    if (saver === undefined) return undefined;
    const messages: { role: 'user' | 'assistant'; content: string }[] = [];
    const input = this.#unsaved;
    if (input !== undefined) messages.push({ role: 'user', content: input });
    if (text !== undefined) messages.push({ role: 'assistant', content: text });
    const envelope = this.#envelope(
      status === 'failed' ? 'idle' : status,
      status === 'suspended' ? root : undefined,
      state,
    );
    const failed = await saver.save(root, envelope, messages, run);
    if (failed === undefined && status !== 'suspended') this.#unsaved = undefined;
    return failed;
  }

  // The reply of a message whose save was given up on (nothing more of it runs or is reported).
  #givenUp(error: Error, usage: AgentReply['usage'], totalUsage: AgentReply['totalUsage']): AgentReply {
    return { status: 'failed', error, restarted: false, usage, totalUsage };
  }

  /**
   * Its owner stops waiting for this agent (a shutdown's or a stop's grace period passed while
   * its reply was being saved to a store that did not answer): whoever awaits that reply gets
   * `error` now, queued messages are answered cancelled, and the agent is stopped. What the
   * store does with the write later is the store's; nothing of this agent runs or emits after.
   */
  abandon(error: Error): void {
    if (this.#saver?.abandon(error) === false) return;
    this.dropMailbox();
    this.#stopNow(error.message);
  }

  cancel(reason: CancelReason = 'user'): boolean {
    const root = this.#root;
    return root === undefined ? false : this.#deps.tree.cancel(root, reason);
  }

  #stopNow(reason: string): void {
    if (this.#status === 'stopped') return;
    this.#status = 'stopped';
    // Made only when a queued message gets it (4–6 µs with its stack, measured): most stops have none.
    this.#mailbox.rejectAll(
      () => new TroupeError(`agent ${this.id} is stopped: ${reason}`, { code: 'ERR_AGENT_STOPPED' }),
    );
    this.#deps.events.emit('agent.stopped', { agentId: this.id, reason, at: this.#deps.clock.now() });
    this.#wakeIdleWaiters();
  }

  /** Resolves when the agent has no message running (suspended counts as idle). */
  whenIdle(): Promise<void> {
    // Messages queued behind a suspension wait for its answer: they do not make the agent busy.
    if (this.#status !== 'running' && (this.#status !== 'idle' || this.#mailbox.size === 0)) return Promise.resolve();
    return new Promise((resolve) => {
      this.#idleWaiters ??= [];
      this.#idleWaiters.push(resolve);
    });
  }

  /** Messages waiting in the mailbox are answered `cancelled` (shutdown). */
  dropMailbox(): void {
    this.#mailbox.dropAll();
  }

  async stop(): Promise<void> {
    if (this.#status === 'stopped') return;
    this.dropMailbox();
    const root = this.#root;
    if (this.#status === 'running') {
      // Running, or settling (its root ended and its reply is being saved): the save is awaited.
      if (root !== undefined) this.#deps.tree.cancel(root, 'shutdown');
      await this.whenIdle();
    }
    // A stopped agent keeps its saved suspension: a new supervisor can resume it.
    if (this.#root !== undefined) this.#deps.tree.forget(this.#root);
    this.#root = undefined;
    this.#stopNow('stopped by its owner');
  }

  /**
   * Another process took the answer to a question of this agent's suspended
   * message and resumed it from the store: what this agent holds is behind
   * what is saved. It stops, writing nothing (saving would overwrite what
   * that process saved); a new `startAgent` loads the conversation again.
   */
  takenElsewhere(root: RunNode, requestId: string): void {
    if (this.#root !== root || this.#status !== 'suspended') return;
    this.#deps.tree.forget(root);
    this.#root = undefined;
    this.#stopNow(
      `another process answered request ${requestId} and resumed this conversation from the store; startAgent it again to load what that process saved`,
    );
    this.#deps.stale(this);
  }

  snapshot(): AgentSnapshot {
    const s = this.#state;
    return {
      agentId: this.id,
      status: this.#status,
      messages: s.messages,
      todos: s.todos,
      metadata: s.metadata,
      events: s.events,
      turns: s.turns,
      usage: s.usage,
      // Suspended: the state is the run's, and its subagents (ended or waiting) are in the tree.
      totalUsage:
        this.#status === 'suspended' && this.#root !== undefined
          ? addUsage(this.#checkpoint.childUsage ?? NO_USAGE, totalOf(this.#root))
          : totalUsage(s),
      pendingRequest: this.pendingRequest?.request,
    };
  }
}
