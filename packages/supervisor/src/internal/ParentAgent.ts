import {
  type Agent,
  type AgentId,
  type Answer,
  abandonPendingTurn,
  BackpressureError,
  CancelledError,
  type CancelReason,
  type Clock,
  ClosedError,
  type LoopEventSink,
  type LoopOutcome,
  type LoopState,
  type Request,
  type RunAgentLoopOptions,
  runAgentLoop,
  type Scope,
  slotRunCancellation,
  TroupeError,
} from '@troupe/core';
import type { EventEmitter } from 'eventemitter3';
import type { AgentHandle, AgentReply, AgentSnapshot, AgentStatus } from '../AgentHandle.js';
import type { CancellationTable } from '../CancellationTable.js';
import type { PersistenceAdapter } from '../Persistence.js';
import { admitRestart, type RestartPolicy } from '../RestartPolicy.js';
import { type AgentStateEnvelope, STATE_ENVELOPE_VERSION } from '../StateEnvelope.js';
import type { SupervisorEvents } from '../SupervisorEvents.js';
import type { Delegation, RunRecord } from './Delegation.js';

/** What a parent agent borrows from its supervisor. */
export interface ParentAgentDeps {
  readonly table: CancellationTable;
  readonly clock: Clock;
  readonly events: EventEmitter<SupervisorEvents>;
  readonly delegation: Delegation;
  readonly persistence: PersistenceAdapter | undefined;
  readonly restart: RestartPolicy;
  readonly mailboxSize: number;
  /** Called when a request reaches this agent (it is the root of the path). */
  onRequestOpened(agent: ParentAgent, request: Request, path: readonly AgentId[]): void;
  /** Called when this agent's open request is withdrawn (cancel, stop). */
  onRequestWithdrawn(requestId: string): void;
  /** True once the supervisor refuses new work. */
  closed(): boolean;
}

interface Job {
  readonly input: string;
  readonly signal: AbortSignal | undefined;
  readonly resolve: (reply: AgentReply) => void;
  readonly reject: (error: Error) => void;
}

/**
 * A parent agent: an actor on the supervisor thread with a bounded mailbox.
 * One message at a time; its loop state lives here and nowhere shared.
 */
export class ParentAgent implements AgentHandle {
  readonly id: AgentId;
  readonly name: string;
  readonly conversationId: string;
  readonly #agent: Agent;
  readonly #scope: Scope;
  readonly #toolContext: Readonly<Record<string, unknown>>;
  readonly #deps: ParentAgentDeps;
  readonly #mailbox: Job[] = [];
  readonly #restarts: number[] = [];
  readonly #record: RunRecord;
  #state: LoopState;
  #checkpoint: LoopState;
  #status: AgentStatus = 'idle';
  #pending: { readonly request: Request; readonly path: readonly AgentId[] } | undefined;
  #running: { readonly cancel: (reason: CancelReason) => boolean } | undefined;
  #children = 0;
  #idleWaiters: (() => void)[] = [];

  constructor(
    agent: Agent,
    init: {
      readonly id: AgentId;
      readonly conversationId: string;
      readonly scope: Scope;
      readonly toolContext: Readonly<Record<string, unknown>>;
      readonly state: LoopState;
      readonly pending: { readonly request: Request; readonly path: readonly AgentId[] } | undefined;
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
    this.#pending = init.pending;
    this.#children = init.children;
    if (init.pending !== undefined) this.#status = 'suspended';
    this.#record = {
      agentId: this.id,
      agent,
      scope: this.#scope,
      toolContext: this.#toolContext,
      ancestry: [],
      nextChild: () => ++this.#children,
    };
  }

  get status(): AgentStatus {
    return this.#status;
  }

  get pendingRequest(): { readonly request: Request; readonly path: readonly AgentId[] } | undefined {
    return this.#pending;
  }

  send(message: string, options: { readonly signal?: AbortSignal } = {}): Promise<AgentReply> {
    if (this.#deps.closed()) return Promise.reject(new ClosedError('the supervisor is closed: create a new one'));
    if (this.#status === 'stopped') {
      return Promise.reject(
        new TroupeError(`agent ${this.id} is stopped: start a new agent`, { code: 'ERR_AGENT_STOPPED' }),
      );
    }
    if (typeof message !== 'string') return Promise.reject(new TypeError('send(message): message must be a string'));
    const signal = options.signal;
    if (signal?.aborted)
      return Promise.reject(new CancelledError('user', 'the message was aborted before it was sent'));
    if (this.#mailbox.length >= this.#deps.mailboxSize) {
      return Promise.reject(
        new BackpressureError(
          `the mailbox of agent ${this.id} is full (${this.#deps.mailboxSize} messages waiting): wait for replies or raise mailboxSize`,
          this.#deps.mailboxSize,
        ),
      );
    }
    return new Promise<AgentReply>((resolve, reject) => {
      const job: Job = { input: message, signal, resolve, reject };
      if (signal !== undefined) {
        signal.addEventListener(
          'abort',
          () => {
            const index = this.#mailbox.indexOf(job);
            if (index >= 0) {
              this.#mailbox.splice(index, 1);
              resolve({ status: 'cancelled', reason: 'user' });
            } else if (this.#current === job) this.#running?.cancel('user');
          },
          { once: true },
        );
      }
      this.#mailbox.push(job);
      this.#pump();
    });
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
    void this.#run({ input: job.input }).then(
      (reply) => {
        this.#current = undefined;
        job.resolve(reply);
        this.#pump();
      },
      (error: unknown) => {
        this.#current = undefined;
        job.reject(error instanceof Error ? error : new Error(String(error)));
        this.#pump();
      },
    );
  }

  /** Resume the suspended turn with an answer (the supervisor checked it is this agent's request). */
  resume(answer: Answer): Promise<AgentReply> {
    if (this.#status !== 'suspended' || this.#pending === undefined) {
      return Promise.reject(
        new TroupeError(`agent ${this.id} is not waiting on a request`, { code: 'ERR_UNKNOWN_REQUEST' }),
      );
    }
    this.#pending = undefined;
    this.#status = 'idle';
    const run = this.#run({ answer });
    return run.finally(() => this.#pump());
  }

  async #run(input: { readonly input?: string; readonly answer?: Answer }): Promise<AgentReply> {
    const { table, clock, delegation, events } = this.#deps;
    this.#status = 'running';
    const handle = table.register(this.id, {});
    const cancellation = slotRunCancellation(table.buffer, handle, { deadline: handle.deadline, clock });
    this.#running = { cancel: (reason) => table.cancel(this.id, reason) };
    let outcome: LoopOutcome;
    try {
      const options: RunAgentLoopOptions = {
        agent: this.#agent,
        run: { scope: this.#scope, toolContext: this.#toolContext, agentId: this.id, parentAgentId: undefined },
        state: this.#state,
        input: input.input,
        answer: input.answer,
        approvedCalls:
          input.answer === undefined ? undefined : new Set(delegation.approvedCalls(this.id, input.answer)),
        clock,
        cancellation,
        approval: delegation.approvalFor(this.#record),
        spawner: delegation.spawnerFor(this.#record),
        events: events as unknown as LoopEventSink,
      };
      outcome = await runAgentLoop(options);
    } catch (error) {
      // The loop never rejects: this is a defect of the library or of a callback it made.
      outcome = {
        status: 'failed',
        error: error instanceof Error ? error : new Error(String(error)),
        state: this.#state,
      };
      events.emit('agent.failed', { agentId: this.id, kind: 'defect', error: outcome.error, at: clock.now() });
    } finally {
      // Children first: a cancelled message is over only when its subagents are.
      await delegation.drain(this.id);
      this.#running = undefined;
      cancellation.close();
      table.release(this.id);
    }
    return this.#settle(outcome, input.input);
  }

  async #settle(outcome: LoopOutcome, input: string | undefined): Promise<AgentReply> {
    const { clock, events, delegation } = this.#deps;
    const at = clock.now();
    switch (outcome.status) {
      case 'done':
        this.#state = outcome.state;
        this.#checkpoint = outcome.state;
        this.#status = 'idle';
        await this.#persist(input, outcome.text);
        events.emit('agent.done', { agentId: this.id, turns: outcome.state.turns, at });
        return { status: 'done', text: outcome.text, turns: outcome.state.turns };
      case 'incomplete':
        this.#state = outcome.state;
        this.#checkpoint = outcome.state;
        this.#status = 'idle';
        await this.#persist(input, undefined);
        return { status: 'incomplete', turns: outcome.state.turns };
      case 'cancelled':
        this.#state = outcome.state;
        this.#checkpoint = outcome.state;
        this.#status = 'idle';
        await this.#persist(input, undefined);
        events.emit('agent.cancelled', { agentId: this.id, reason: outcome.reason, at });
        return { status: 'cancelled', reason: outcome.reason };
      case 'suspended': {
        this.#state = outcome.state;
        const path = delegation.takeOrigin(outcome.request.id, [this.id]);
        this.#pending = { request: outcome.request, path };
        this.#status = 'suspended';
        await this.#persist(input, undefined);
        this.#deps.onRequestOpened(this, outcome.request, path);
        return { status: 'suspended', request: outcome.request, path };
      }
      case 'failed': {
        const restarted = admitRestart(this.#deps.restart, this.#restarts, at);
        events.emit('agent.failed', { agentId: this.id, kind: 'failure', error: outcome.error, at });
        // One-for-one: only this agent restarts, from its last good state.
        this.#state = this.#checkpoint;
        if (restarted) {
          this.#status = 'idle';
          events.emit('agent.restarted', { agentId: this.id, restarts: this.#restarts.length, at });
        } else {
          this.#stopNow(
            `restarted ${this.#deps.restart.maxRestarts} times within ${this.#deps.restart.periodMs} ms and failed again: ${outcome.error.message}`,
          );
        }
        return { status: 'failed', error: outcome.error, restarted };
      }
    }
  }

  async #persist(input: string | undefined, answer: string | undefined): Promise<void> {
    const persistence = this.#deps.persistence;
    if (persistence === undefined) return;
    const context = { agentId: this.id, conversationId: this.conversationId };
    const envelope: AgentStateEnvelope = {
      version: STATE_ENVELOPE_VERSION,
      agentId: this.id,
      conversationId: this.conversationId,
      agentName: this.name,
      status: this.#pending === undefined ? 'idle' : 'suspended',
      state: this.#state,
      waitingOn: this.#pending?.request.id,
      runId: undefined,
      pendingRequest:
        this.#pending === undefined
          ? undefined
          : { request: this.#pending.request, path: this.#pending.path, openedAt: this.#deps.clock.now() },
      childCounter: this.#children,
      savedAt: this.#deps.clock.now(),
    };
    try {
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
    if (this.#running !== undefined) return this.#running.cancel(reason);
    if (this.#status === 'suspended' && this.#pending !== undefined) {
      this.#withdraw(reason);
      return true;
    }
    return false;
  }

  #withdraw(reason: CancelReason): void {
    const pending = this.#pending;
    if (pending === undefined) return;
    this.#pending = undefined;
    this.#deps.onRequestWithdrawn(pending.request.id);
    this.#deps.delegation.forget(this.id, pending.request.id);
    this.#state = abandonPendingTurn(this.#state, reason, this.#deps.clock);
    this.#checkpoint = this.#state;
    this.#status = 'idle';
    this.#deps.events.emit('agent.cancelled', { agentId: this.id, reason, at: this.#deps.clock.now() });
    void this.#persist(undefined, undefined);
    this.#pump();
  }

  #stopNow(reason: string): void {
    if (this.#status === 'stopped') return;
    this.#status = 'stopped';
    const error = new TroupeError(`agent ${this.id} is stopped: ${reason}`, { code: 'ERR_AGENT_STOPPED' });
    for (const job of this.#mailbox.splice(0)) job.reject(error);
    this.#deps.events.emit('agent.stopped', { agentId: this.id, reason, at: this.#deps.clock.now() });
    for (const resolve of this.#idleWaiters.splice(0)) resolve();
  }

  /** Resolves when the agent has no message running (suspended counts as idle). */
  whenIdle(): Promise<void> {
    if (this.#status !== 'running' && this.#mailbox.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  async stop(): Promise<void> {
    if (this.#status === 'stopped') return;
    for (const job of this.#mailbox.splice(0)) job.resolve({ status: 'cancelled', reason: 'shutdown' });
    if (this.#running !== undefined) {
      this.#running.cancel('shutdown');
      await this.whenIdle();
    }
    if (this.#status === 'suspended') {
      // A stopped agent keeps its saved suspension: a new supervisor can resume it.
      this.#deps.onRequestWithdrawn(this.#pending?.request.id ?? '');
      this.#deps.delegation.forget(this.id, this.#pending?.request.id);
    }
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
      pendingRequest: this.#pending?.request,
    };
  }
}
