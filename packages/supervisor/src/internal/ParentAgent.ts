import { AsyncResource } from 'node:async_hooks';
import {
  type Agent,
  type AgentId,
  abandonPendingTurn,
  BackpressureError,
  CancelledError,
  type CancelReason,
  type Clock,
  ClosedError,
  type LoopState,
  type ModelDelta,
  type Request,
  type Scope,
  TroupeError,
  totalUsage,
} from '@troupe/core';
import type { EventEmitter } from 'eventemitter3';
import type {
  AgentHandle,
  AgentReply,
  AgentSnapshot,
  AgentStatus,
  StreamChunk,
  StreamOptions,
} from '../AgentHandle.js';
import type { PersistenceAdapter } from '../Persistence.js';
import { admitRestart, type RestartPolicy } from '../RestartPolicy.js';
import type { RunTree } from '../RunTree.js';
import { type AgentStateEnvelope, STATE_ENVELOPE_VERSION } from '../StateEnvelope.js';
import type { SupervisorEvents } from '../SupervisorEvents.js';
import { AgentStream, type StreamSource } from './AgentStream.js';
import { firstOpenRequest, type RootOwner, type RunNode, totalOf } from './RunNode.js';

/** What a parent agent borrows from its supervisor. */
export interface ParentAgentDeps {
  readonly tree: RunTree;
  readonly clock: Clock;
  readonly events: EventEmitter<SupervisorEvents>;
  readonly persistence: PersistenceAdapter | undefined;
  readonly restart: RestartPolicy;
  readonly mailboxSize: number;
  /** True once the supervisor refuses new work. */
  closed(): boolean;
}

/** A saved question of a restored conversation, to open again under its id. */
export interface RestoredRequest {
  readonly id: string;
  readonly toolCallId: string;
  readonly local: Request;
  readonly approval: boolean;
}

interface Job {
  readonly input: string;
  readonly signal: AbortSignal | undefined;
  /** Set by `stream`: the message's deltas. */
  readonly onDeltas: ((node: RunNode, deltas: readonly ModelDelta[]) => void) | undefined;
  readonly resolve: (reply: AgentReply) => void;
  readonly reject: (error: Error) => void;
  /** Removes the job's abort listener (set once it has one). */
  detach: (() => void) | undefined;
  /** A job that waited in the mailbox starts in the async context of its `send` (a host's trace, its logger's request id). */
  context: ((start: () => RunNode) => RunNode) | undefined;
}

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
  readonly #mailbox: Job[] = [];
  readonly #restarts: number[] = [];
  #state: LoopState;
  #checkpoint: LoopState;
  #status: AgentStatus = 'idle';
  /** The run of the current message (running or suspended). */
  #root: RunNode | undefined;
  /** The input of the current message, until it is saved. */
  #unsaved: string | undefined;
  #children: number;
  #idleWaiters: (() => void)[] = [];

  constructor(
    agent: Agent,
    init: {
      readonly id: AgentId;
      readonly conversationId: string;
      readonly scope: Scope;
      readonly toolContext: Readonly<Record<string, unknown>>;
      readonly state: LoopState;
      readonly children: number;
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
    this.#state = init.state;
    this.#checkpoint = init.state;
    this.#children = init.children;
  }

  get status(): AgentStatus {
    return this.#status;
  }

  /** The first open question of the current message, when it is suspended. */
  get pendingRequest(): { readonly request: Request; readonly path: readonly AgentId[] } | undefined {
    const root = this.#root;
    return root === undefined || root.phase !== 'suspended' ? undefined : firstOpenRequest(root);
  }

  /** Resume a restored conversation that was suspended: its root run, suspended, with its questions open again. */
  restoreSuspended(requests: readonly RestoredRequest[]): void {
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
      },
      requests,
    );
    this.#root = root;
    this.#status = 'suspended';
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
      const job: Job = { input: message, signal, onDeltas, resolve, reject, detach: undefined, context: undefined };
      if (this.#status !== 'idle' || this.#mailbox.length > 0) job.context = AsyncResource.bind((start) => start());
      if (signal !== undefined) {
        const onAbort = (): void => {
          const index = this.#mailbox.indexOf(job);
          if (index >= 0) {
            this.#mailbox.splice(index, 1);
            job.detach?.();
            resolve({ status: 'cancelled', reason: 'user', usage: ZERO, totalUsage: ZERO });
          } else if (this.#current === job && this.#root !== undefined) this.#deps.tree.cancel(this.#root, 'user');
        };
        signal.addEventListener('abort', onAbort, { once: true });
        job.detach = () => signal.removeEventListener('abort', onAbort);
      }
      this.#mailbox.push(job);
      this.#pump();
    });
  }

  /** Why a message is refused before it is queued, if it is. */
  #refuse(message: unknown, signal: AbortSignal | undefined): Error | undefined {
    if (this.#deps.closed()) return new ClosedError('the supervisor is closed: create a new one');
    if (this.#status === 'stopped') {
      return new TroupeError(`agent ${this.id} is stopped: start a new agent`, { code: 'ERR_AGENT_STOPPED' });
    }
    if (typeof message !== 'string') return new TypeError('send(message): message must be a string');
    if (signal?.aborted) return new CancelledError('user', 'the message was aborted before it was sent');
    if (this.#mailbox.length >= this.#deps.mailboxSize) {
      return new BackpressureError(
        `the mailbox of agent ${this.id} is full (${this.#deps.mailboxSize} messages waiting): wait for replies or raise mailboxSize`,
        this.#deps.mailboxSize,
      );
    }
    return undefined;
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
      for (const resolve of this.#idleWaiters.splice(0)) resolve();
      return;
    }
    this.#current = job;
    this.#status = 'running';
    this.#unsaved = job.input;
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
          state: this.#state,
          input: job.input,
          nextChild: this.#children,
          onDeltas: job.onDeltas,
        });
      root = job.context === undefined ? start() : job.context(start);
    } catch (error) {
      this.#status = 'idle';
      this.#current = undefined;
      job.detach?.();
      job.reject(error instanceof Error ? error : new Error(String(error)));
      this.#pump();
      return;
    }
    this.#root = root;
    void this.#deps.tree.whenQuiet(root).then((reply) => {
      job.detach?.();
      if (reply instanceof Error) job.reject(reply);
      else job.resolve(reply as AgentReply);
    });
  }

  resumed(_root: RunNode): void {
    if (this.#status === 'suspended') this.#status = 'running';
  }

  /** The message's tree is quiet: keep its state, save it, and tell every waiter. */
  async settle(root: RunNode): Promise<AgentReply> {
    const { clock, events } = this.#deps;
    const at = clock.now();
    this.#children = Math.max(this.#children, root.nextChild);
    const usage = root.usage;
    const total = totalOf(root);
    const ref = { agentId: this.id, runId: root.id, path: root.path };
    if (root.phase !== 'ended') {
      // Suspended throughout: keep the state to resume from; the reply names the first open question.
      this.#state = root.state as LoopState;
      this.#status = this.#status === 'stopped' ? 'stopped' : 'suspended';
      const first = firstOpenRequest(root);
      events.emit('agent.suspended', { ...ref, usage, totalUsage: total, requestId: first?.request.id ?? '', at });
      await this.#persist(undefined, root);
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
      return this.#lastReply ?? { status: 'cancelled', reason: 'user', usage, totalUsage: total };
    }
    this.#root = undefined;
    this.#current = undefined;
    const end = root.end;
    let state = root.state ?? this.#state;
    if (state.pending !== undefined)
      state = abandonPendingTurn(state, end?.status === 'cancelled' ? end.reason : 'user', clock);
    let reply: AgentReply;
    switch (end?.status) {
      case 'done':
        this.#keep(state);
        await this.#persist(end.text, root);
        events.emit('agent.done', { ...ref, usage, totalUsage: total, turns: state.turns, at });
        reply = { status: 'done', text: end.text, turns: state.turns, usage, totalUsage: total };
        break;
      case 'incomplete':
        this.#keep(state);
        await this.#persist(undefined, root);
        events.emit('agent.incomplete', { ...ref, usage, totalUsage: total, turns: state.turns, at });
        reply = { status: 'incomplete', turns: state.turns, usage, totalUsage: total };
        break;
      case 'cancelled':
        this.#keep(state);
        await this.#persist(undefined, root);
        events.emit('agent.cancelled', { ...ref, usage, totalUsage: total, reason: end.reason, at });
        reply = { status: 'cancelled', reason: end.reason, usage, totalUsage: total };
        break;
      default: {
        // A failure of its run (a crash cannot happen here: a parent runs on this thread).
        const error =
          end?.status === 'failed' || end?.status === 'crashed'
            ? end.error
            : new Error('the run ended without an outcome');
        // A defect (of the library or of a callback it trusted) is reported once and does not
        // count against the restart intensity; a failure does.
        const defect = (error as { code?: unknown }).code === 'ERR_INTERNAL';
        events.emit('agent.failed', {
          agentId: this.id,
          runId: root.id,
          kind: defect ? 'defect' : 'failure',
          error,
          at,
        });
        const restarted = defect || admitRestart(this.#deps.restart, this.#restarts, at);
        // One-for-one: only this agent restarts, from its last good state.
        this.#state = this.#checkpoint;
        this.#unsaved = undefined;
        if (restarted) {
          this.#status = 'idle';
          events.emit('agent.restarted', { agentId: this.id, restarts: this.#restarts.length, at });
        } else {
          this.#stopNow(
            `restarted ${this.#deps.restart.maxRestarts} times within ${this.#deps.restart.periodMs} ms and failed again: ${error.message}`,
          );
        }
        reply = { status: 'failed', error, restarted, usage, totalUsage: total };
      }
    }
    this.#lastReply = reply;
    queueMicrotask(() => this.#pump());
    return reply;
  }

  #lastReply: AgentReply | undefined;

  #keep(state: LoopState): void {
    this.#state = state;
    this.#checkpoint = state;
    if (this.#status !== 'stopped') this.#status = 'idle';
  }

  async #persist(answer: string | undefined, root: RunNode): Promise<void> {
    const persistence = this.#deps.persistence;
    if (persistence === undefined) return;
    const context = { agentId: this.id, conversationId: this.conversationId };
    const pending = root.phase === 'suspended' ? firstOpenRequest(root) : undefined;
    const envelope: AgentStateEnvelope = {
      version: STATE_ENVELOPE_VERSION,
      agentId: this.id,
      conversationId: this.conversationId,
      agentName: this.name,
      status: pending === undefined ? 'idle' : 'suspended',
      state: this.#state,
      waitingOn: pending?.request.id,
      runId: root.id,
      pendingRequest:
        pending === undefined
          ? undefined
          : { request: pending.request, path: pending.path, openedAt: this.#deps.clock.now() },
      openRequests:
        root.phase !== 'suspended'
          ? undefined
          : [...root.requests.values()]
              .filter((r) => r.answer === undefined)
              .map((r) => ({ id: r.id, toolCallId: r.toolCallId, local: r.local, approval: r.approval })),
      childCounter: this.#children,
      savedAt: this.#deps.clock.now(),
    };
    try {
      const input = this.#unsaved;
      this.#unsaved = undefined;
      if (input !== undefined) await persistence.saveMessage(this.#scope, { role: 'user', content: input }, context);
      if (answer !== undefined)
        await persistence.saveMessage(this.#scope, { role: 'assistant', content: answer }, context);
      await persistence.persistState(this.#scope, envelope, context);
    } catch (error) {
      this.#deps.events.emit('agent.failed', {
        agentId: this.id,
        kind: 'defect',
        error: new TroupeError(`persisting agent ${this.id} failed: ${(error as Error)?.message ?? String(error)}`, {
          code: 'ERR_INTERNAL',
          cause: error,
        }),
        at: this.#deps.clock.now(),
      });
    }
  }

  cancel(reason: CancelReason = 'user'): boolean {
    const root = this.#root;
    return root === undefined ? false : this.#deps.tree.cancel(root, reason);
  }

  #stopNow(reason: string): void {
    if (this.#status === 'stopped') return;
    this.#status = 'stopped';
    const error = new TroupeError(`agent ${this.id} is stopped: ${reason}`, { code: 'ERR_AGENT_STOPPED' });
    for (const job of this.#mailbox.splice(0)) {
      job.detach?.();
      job.reject(error);
    }
    this.#deps.events.emit('agent.stopped', { agentId: this.id, reason, at: this.#deps.clock.now() });
    for (const resolve of this.#idleWaiters.splice(0)) resolve();
  }

  /** Resolves when the agent has no message running (suspended counts as idle). */
  whenIdle(): Promise<void> {
    if (this.#status !== 'running' && this.#mailbox.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  /** Messages waiting in the mailbox are answered `cancelled` (shutdown). */
  dropMailbox(): void {
    for (const job of this.#mailbox.splice(0)) {
      job.detach?.();
      job.resolve({ status: 'cancelled', reason: 'shutdown', usage: ZERO, totalUsage: ZERO });
    }
  }

  async stop(): Promise<void> {
    if (this.#status === 'stopped') return;
    this.dropMailbox();
    const root = this.#root;
    if (root !== undefined && this.#status === 'running') {
      this.#deps.tree.cancel(root, 'shutdown');
      await this.whenIdle();
    }
    // A stopped agent keeps its saved suspension: a new supervisor can resume it.
    if (this.#root !== undefined) this.#deps.tree.forget(this.#root);
    this.#root = undefined;
    this.#stopNow('stopped by its owner');
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
      totalUsage: totalUsage(s),
      pendingRequest: this.pendingRequest?.request,
    };
  }
}

const ZERO = Object.freeze({ inputTokens: 0, outputTokens: 0 });
