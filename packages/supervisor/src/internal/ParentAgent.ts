import {
  type Agent,
  type AgentId,
  type CancelReason,
  isTroupeError,
  type LoopState,
  type ModelDelta,
  NO_USAGE,
  type Request,
  type Scope,
  subtractUsage,
  type Usage,
} from '@troupe/core';
import { abandonPendingTurn } from '@troupe/core/internal';
import type {
  AgentHandle,
  AgentReply,
  AgentSnapshot,
  AgentStatus,
  SendOptions,
  StreamChunk,
  StreamOptions,
} from '../AgentHandle.js';
import type { RunStatus } from '../persistence/Persistence.js';
import { admitRestart, type RestartPolicy } from '../RestartPolicy.js';
import type { RestoredRequest, RestoredRun, RootSpec } from '../RunTree.js';
import { AgentStream, type StreamSource } from './AgentStream.js';
import {
  Conversation,
  type InterruptedMessage,
  messageStarter,
  resumedChildUsage,
  toolContextKeys,
  withMessageUsage,
} from './Conversation.js';
import { compactIdleState } from './compactIdleState.js';
import { type Job, Mailbox, type MailboxOwner, newJob } from './Mailbox.js';
import {
  type AdmissionDeps,
  type Admitting,
  checkCopy,
  refuseStopped,
  reportQueued,
  resumeRefusal,
  sendRefusal,
  waitBehind,
} from './MessageAdmission.js';
import { emitMessageOutcome, endedReply, type MessageRef } from './messageEvents.js';
import type { RootOwner, RunNode } from './RunNode.js';
import { totalOf } from './RunNode.js';

/** What a parent agent borrows from its supervisor. */
export interface ParentAgentDeps extends AdmissionDeps {
  readonly restart: RestartPolicy;
  /** The agent has nothing running, queued or waiting (the supervisor may stop holding it). */
  idle(agent: ParentAgent): void;
  /** The agent got work (the supervisor holds it while it has some). */
  busy(agent: ParentAgent): void;
  /** The agent stopped because its copy is stale (see {@link ParentAgent.takenElsewhere}): let go of it. */
  stale(agent: ParentAgent): void;
}

/** What a `suspended` reply names when no question of its own is open. */
const NO_REQUEST: Request = Object.freeze({ id: '', kind: 'none', prompt: '' });

/** The reply each ended root run was settled with (a second settle returns it; it goes with its run, not its agent). */
const REPLIES = new WeakMap<RunNode, AgentReply>();

/**
 * A parent agent: an actor on the supervisor thread with a bounded mailbox.
 * One message at a time; each message is a root run of the supervisor's run
 * tree, and this actor keeps the conversation between messages: its state,
 * its restarts, what it saved.
 */
export class ParentAgent implements AgentHandle, Admitting, MailboxOwner, RootOwner, StreamSource {
  readonly #agent: Agent;
  readonly #scope: Scope;
  readonly #toolContext: Readonly<Record<string, unknown>>;
  readonly #deps: ParentAgentDeps;
  /** The messages waiting (made by the first, let go once none waits: an idle agent holds none, 72 B). */
  #mailbox: Mailbox | undefined;
  /** When it restarted, within the policy's period (made on the first restart). */
  #restarts: number[] | undefined;
  /** What it remembers of its conversation, and how it saves it. */
  readonly #c: Conversation;
  #status: AgentStatus = 'idle';
  /** Set while a message a crash interrupted waits for `resume()`. */
  #interrupted: InterruptedMessage | undefined;
  /** The run of the current message (running or suspended). */
  #root: RunNode | undefined;
  /** Who waits for it to be idle (made on the first wait: most agents never have one). */
  #idleWaiters: (() => void)[] | undefined;
  /**
   * Its place in its supervisor's order of idle agents: the idle agent used less recently, and the
   * one used more recently (written by the AgentRegistry only; both undefined while not in it).
   */
  idleOlder: ParentAgent | undefined = undefined;
  idleNewer: ParentAgent | undefined = undefined;

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
    this.#agent = agent;
    this.#scope = init.scope;
    this.#toolContext = init.toolContext;
    this.#deps = deps;
    this.#c = new Conversation(
      {
        agentId: init.id,
        conversationId: init.conversationId,
        agentName: agent.name,
        state: init.state,
        children: init.children,
        revision: init.revision,
        // Sorted: the same keys save the same envelope, in whatever order they were given.
        toolContextKeys: toolContextKeys(init.toolContext),
      },
      deps,
    );
  }

  // Its ids are its conversation's (one copy of each field per agent).
  get id(): AgentId {
    return this.#c.agentId;
  }

  get name(): string {
    return this.#c.agentName;
  }

  get conversationId(): string {
    return this.#c.conversationId;
  }

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
   * Resume a restored conversation that was suspended: its root run (and the suspended runs under
   * it), suspended, with their questions open again under the ids the host knows.
   */
  restoreSuspended(
    run: { readonly runId: string | undefined; readonly attempt: number; readonly state: LoopState },
    requests: readonly RestoredRequest[],
    descendants: readonly RestoredRun[] = [],
  ): RunNode {
    this.#c.state = run.state;
    const root = this.#deps.tree.restoreRoot(
      { ...this.#rootSpec(this.#c.state, ''), runId: run.runId as never, attempt: run.attempt },
      requests,
      descendants,
      // What its children spent in the message's completed turns: in its state, not in the conversation's before it.
      subtractUsage(run.state.childUsage ?? NO_USAGE, this.#c.checkpoint.childUsage ?? NO_USAGE),
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
    this.#c.reserveChildren(n);
  }

  /** A restored conversation whose message a crash interrupted: `resume()` finishes it. */
  restoreInterrupted(message: InterruptedMessage): void {
    this.#interrupted = message;
    this.#status = 'interrupted';
  }

  /** {@inheritDoc AgentHandle.resume} */
  resume(options: { readonly signal?: AbortSignal } = {}): Promise<AgentReply> {
    const message = this.#interrupted;
    const signal = options?.signal;
    const refused = resumeRefusal(this.id, this.#status, message, this.#deps.closed(), signal);
    if (refused !== undefined) return Promise.reject(refused);
    this.#interrupted = undefined;
    this.#status = 'idle';
    return new Promise<AgentReply>((resolve, reject) => {
      this.#enqueue(newJob('', signal, undefined, message, resolve, reject), true);
    });
  }

  send(message: string, options: SendOptions = {}): Promise<AgentReply> {
    return this.sendStreaming(message, options ?? {}, undefined);
  }

  /** `send`, with the message's deltas reported to `onDeltas` (what `stream` reads). */
  sendStreaming(
    message: string,
    options: SendOptions,
    onDeltas: ((node: RunNode, deltas: readonly ModelDelta[]) => void) | undefined,
  ): Promise<AgentReply> {
    const { signal, whileSuspended } = options;
    const refused = sendRefusal(this, this.#mailbox, this.#deps, message, signal, whileSuspended);
    if (refused !== undefined) return Promise.reject(refused);
    const queue = whileSuspended === 'queue';
    return new Promise<AgentReply>((resolve, reject) => {
      this.#enqueue(newJob(message, signal, onDeltas, undefined, resolve, reject, queue), false);
      if (queue) reportQueued(this, this.#mailbox, this.#deps);
    });
  }

  // Queue a job (a resume goes first: see Mailbox.queue), and run it if the agent is idle.
  #enqueue(job: Job, first: boolean): void {
    this.#mailbox ??= new Mailbox(this.#deps.mailboxSize);
    this.#mailbox.queue(job, first, this, this.#status !== 'idle');
    this.#deps.busy(this);
    const root = this.#root;
    if (!first && this.#status === 'suspended' && root !== undefined) {
      checkCopy(this, root, this.#c, this.#deps, {
        held: () => this.#root === root && this.#status === 'suspended',
        mailbox: () => this.#mailbox,
        letGo: (why) => this.#letGo(root, why),
      });
    }
    this.#pump();
  }

  /** The signal of `job` aborted once it left the mailbox: its message is cancelled if it is the one running. */
  aborted(job: Job): void {
    if (this.#current === job && this.#root !== undefined) this.#deps.tree.cancel(this.#root, 'user');
  }

  /** {@inheritDoc AgentHandle.stream} */
  stream(
    message: string,
    options: StreamOptions = {},
  ): AsyncIterableIterator<StreamChunk> & { readonly reply: Promise<AgentReply> } {
    return new AgentStream(this, message, options ?? {});
  }

  #current: Job | undefined;

  #pump(): void {
    if (this.#status !== 'idle') return;
    const job = this.#mailbox?.shift();
    if (job === undefined) {
      // None waits: let the mailbox go (a job it watched and let run is not in the next one).
      this.#mailbox = undefined;
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
    this.#c.unsaved = durable || resume !== undefined ? undefined : job.input;
    const from = resume?.state ?? this.#c.state;
    const beforeRun =
      durable && d !== undefined
        ? messageStarter(d, resume === undefined ? job.input : undefined, from, (root) =>
            this.#c.envelope('running', root, from),
          )
        : undefined;
    let root: RunNode;
    try {
      const start = (): RunNode =>
        this.#deps.tree.startRoot({
          ...this.#rootSpec(from, resume === undefined ? job.input : ''),
          onDeltas: job.onDeltas,
          beforeRun,
          runId: resume?.runId as never,
          attempt: resume?.attempt,
          interrupted:
            resume === undefined
              ? undefined
              : { started: new Set(resume.started.map((c) => c.toolCallId)), lost: resume.lost },
          childUsage: resume === undefined ? undefined : resumedChildUsage(resume, this.#c.checkpoint),
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

  // What every root run of this agent is made from.
  #rootSpec(state: LoopState, input: string): RootSpec {
    return {
      kind: 'message',
      agent: this.#agent,
      agentId: this.id,
      scope: this.#scope,
      toolContext: this.#toolContext,
      owner: this,
      state,
      input,
      nextChild: this.#c.children,
      conversation: this.#c.saved,
    };
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
    this.#c.children = Math.max(this.#c.children, root.nextChild);
    // The run's loop carries the conversation's tokens so far: the message's are what it added
    // to the state it started from.
    const start = this.#c.checkpoint;
    const usage = subtractUsage(root.usage, start.usage);
    const total = subtractUsage(totalOf(root), start.usage);
    const ref: MessageRef = { agentId: this.id, runId: root.id, path: root.path, usage, totalUsage: total, at };
    if (root.phase !== 'ended') {
      // Suspended throughout: keep the state to resume from; the reply names the first open question.
      this.#c.state = root.state as LoopState;
      this.#status = this.#status === 'stopped' ? 'stopped' : 'suspended';
      const first = this.#deps.tree.requests.firstOpen(root);
      emitMessageOutcome(events, ref, { status: 'suspended', requestId: first?.request.id ?? '' });
      // The run tree saved the runs and their questions; this saves the conversation.
      const failed = await this.#c.save(root, 'suspended', undefined, undefined);
      if (this.#c.abandonedWith !== undefined) return this.#givenUp(usage, total);
      if (failed !== undefined && isTroupeError(failed, 'ERR_STORE_FENCED')) {
        this.#deps.tree.forget(root);
        this.#root = undefined;
        this.#current = undefined;
        return this.#fencedOut(failed, usage, total);
      }
      // Messages that were waiting behind this one now wait on a person: refused, unless they asked to queue.
      waitBehind(this, this.#mailbox, this.#deps);
      // A suspended agent counts as idle (a close() drains without waiting on a person).
      this.#wakeIdleWaiters();
      // (No open question: a run that only waits on its children names none.)
      const request = first?.request ?? NO_REQUEST;
      return { status: 'suspended', request, path: first?.path ?? root.path, usage, totalUsage: total };
    }
    if (this.#root !== root) {
      // Reported already (an ended root is settled once).
      return REPLIES.get(root) ?? { status: 'cancelled', reason: 'user', usage, totalUsage: total };
    }
    this.#root = undefined;
    this.#current = undefined;
    const end = root.end;
    let state = root.state ?? this.#c.state;
    if (state.pending !== undefined)
      state = abandonPendingTurn(state, end?.status === 'cancelled' ? end.reason : 'user', clock);
    let reply: AgentReply;
    // destroy() leaves what was saved as it was: the next supervisor resumes from there (a close()
    // or stop() that cut the message saves it cancelled, as the host is told).
    const shutdown = end?.status === 'cancelled' && end.reason === 'shutdown' && this.#deps.tree.leavesSaved;
    const saved = (status: 'idle' | 'failed', run: RunStatus, text: string | undefined): Promise<Error | undefined> =>
      shutdown ? Promise.resolve(undefined) : this.#c.save(root, status, run, text, state);
    if (end?.status === 'done' || end?.status === 'incomplete' || end?.status === 'cancelled') {
      // Saved with the message's tokens, its subagents' too: a cancel's abandoned turn drops the
      // calls whose children had ended, and with them what those children spent.
      // At the size of what it holds, frozen: the state saved is the one kept (a store may keep that object).
      state = compactIdleState(withMessageUsage(state, start, usage, total));
      const failed = await saved('idle', end.status, end.status === 'done' ? end.text : undefined);
      reply = this.#unsaved(failed, usage, total) ?? this.#kept(state, () => endedReply(events, ref, end, state.turns));
    } else {
      reply = await this.#failed(root, end, ref, start);
    }
    REPLIES.set(root, reply);
    queueMicrotask(() => this.#pump());
    return reply;
  }

  // A failure of its run (a crash cannot happen here: a parent runs on this thread): a restart
  // from its last good state, or a stop past the restart intensity.
  async #failed(root: RunNode, end: RunNode['end'], ref: MessageRef, start: LoopState): Promise<AgentReply> {
    const { events } = this.#deps;
    const { usage, totalUsage: total, at } = ref;
    const error =
      end?.status === 'failed' || end?.status === 'crashed' ? end.error : new Error('the run ended without an outcome');
    // A defect (of the library or of a callback it trusted) is reported once and does not
    // count against the restart intensity; a failure does.
    if (isTroupeError(error, 'ERR_STORE_FENCED')) {
      // Refused as the message started: nothing of it ran.
      events.emit('persistence.failed', { agentId: this.id, runId: root.id, error, at });
      return this.#fencedOut(error, usage, total);
    }
    const defect = (error as { code?: unknown }).code === 'ERR_INTERNAL';
    emitMessageOutcome(events, ref, { status: 'failed', kind: defect ? 'defect' : 'failure', error });
    this.#restarts ??= [];
    const restarted = defect || admitRestart(this.#deps.restart, this.#restarts, at);
    // One-for-one: only this agent restarts, from its last good state — with the tokens the
    // failed message spent.
    this.#c.checkpoint = withMessageUsage(this.#c.checkpoint, start, usage, total);
    this.#c.state = this.#c.checkpoint;
    this.#c.unsaved = undefined;
    // The run is saved as failed; the conversation, as it was before the message.
    await this.#c.save(root, 'failed', 'failed', undefined, this.#c.checkpoint);
    if (this.#c.abandonedWith !== undefined) return this.#givenUp(usage, total);
    if (restarted) {
      this.#status = 'idle';
      events.emit('agent.restarted', { agentId: this.id, restarts: this.#restarts?.length ?? 0, at });
    } else {
      this.#stopNow(
        `restarted ${this.#deps.restart.maxRestarts} times within ${this.#deps.restart.periodMs} ms and failed again: ${error.message}`,
      );
    }
    return { status: 'failed', error, restarted, usage, totalUsage: total };
  }

  #wakeIdleWaiters(): void {
    const waiters = this.#idleWaiters;
    if (waiters === undefined) return;
    this.#idleWaiters = undefined;
    for (const resolve of waiters) resolve();
  }

  // The reply of a message whose save was given up on, refused (fenced) or failed; undefined when
  // it was saved. Not saved: the agent goes on from its last saved state, and the caller learns why.
  #unsaved(failed: Error | undefined, usage: Usage, totalUsage: Usage): AgentReply | undefined {
    if (this.#c.abandonedWith !== undefined) return this.#givenUp(usage, totalUsage);
    if (failed === undefined) return undefined;
    if (isTroupeError(failed, 'ERR_STORE_FENCED')) return this.#fencedOut(failed, usage, totalUsage);
    this.#c.fallBack();
    if (this.#status !== 'stopped') this.#status = 'idle';
    return { status: 'failed', error: failed, restarted: true, usage, totalUsage };
  }

  // The store refused a save (`ERR_STORE_FENCED`): another process saved the conversation since
  // this copy loaded it. It stops, saving nothing more, and is let go (no restart is spent).
  #fencedOut(error: Error, usage: AgentReply['usage'], totalUsage: AgentReply['totalUsage']): AgentReply {
    this.#c.fallBack();
    this.#stopNow(
      `another process saved conversation ${this.conversationId} since this copy loaded it; startAgent it again to load what is saved`,
    );
    this.#deps.stale(this);
    return { status: 'failed', error, restarted: false, usage, totalUsage };
  }

  // Its message saved: the state is kept (tokens spent too, also those of children a cancel cut
  // off before they reported), and `reply` is the message's.
  #kept(state: LoopState, reply: () => AgentReply): AgentReply {
    this.#c.keep(state);
    if (this.#status !== 'stopped') this.#status = 'idle';
    return reply();
  }

  // The reply of a message whose save was given up on (nothing more of it runs or is reported).
  #givenUp(usage: Usage, totalUsage: Usage): AgentReply {
    return { status: 'failed', error: this.#c.abandonedWith as Error, restarted: false, usage, totalUsage };
  }

  /**
   * Its owner stops waiting for this agent (a shutdown's or a stop's grace period passed while
   * its reply was being saved to a store that did not answer): whoever awaits that reply gets
   * `error` now, queued messages are answered cancelled, and the agent is stopped. What the
   * store does with the write later is the store's; nothing of this agent runs or emits after.
   */
  abandon(error: Error): void {
    if (!this.#c.abandon(error)) return;
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
    refuseStopped(this, this.#mailbox, reason);
    this.#deps.events.emit('agent.stopped', { agentId: this.id, reason, at: this.#deps.clock.now() });
    this.#wakeIdleWaiters();
  }

  /** Resolves when the agent has no message running (suspended counts as idle). */
  whenIdle(): Promise<void> {
    // Messages queued behind a suspension wait for its answer: they do not make the agent busy.
    if (this.#status !== 'running' && (this.#status !== 'idle' || (this.#mailbox?.size ?? 0) === 0))
      return Promise.resolve();
    return new Promise((resolve) => {
      this.#idleWaiters ??= [];
      this.#idleWaiters.push(resolve);
    });
  }

  /** Messages waiting in the mailbox are answered `cancelled` (shutdown). */
  dropMailbox(): void {
    this.#mailbox?.dropAll();
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
   * Another process took the answer to a question of this agent's suspended message and resumed
   * it from the store: this copy is stale, and is let go (a new `startAgent` loads what is saved).
   */
  takenElsewhere(root: RunNode, requestId: string): void {
    if (this.#root !== root || this.#status !== 'suspended') return;
    this.#letGo(
      root,
      `another process answered request ${requestId} and resumed this conversation from the store; startAgent it again to load what that process saved`,
    );
  }

  // This copy is behind what is saved: it stops, writing nothing, and the supervisor lets go of it.
  #letGo(root: RunNode, why: string): void {
    this.#deps.tree.forget(root);
    this.#root = undefined;
    this.#stopNow(why);
    this.#deps.stale(this);
  }

  snapshot(): AgentSnapshot {
    // Suspended: the state is the run's, and its subagents (ended or waiting) are in the tree.
    const suspended = this.#status === 'suspended' ? this.#root : undefined;
    return this.#c.snapshot(this.#status, suspended, this.pendingRequest?.request);
  }
}
