import {
  type AgentId,
  BackpressureError,
  CancelledError,
  type Clock,
  ClosedError,
  InvalidArgumentError,
  isTroupeError,
  type Request,
  TroupeError,
} from '@troupe/core';
import { describeValue } from '@troupe/core/internal';
import type { EventEmitter } from 'eventemitter3';
import type { AgentStatus } from '../AgentHandle.js';
import type { Durability } from '../persistence/Durability.js';
import type { RunTree } from '../RunTree.js';
import type { SupervisorEvents } from '../SupervisorEvents.js';
import type { Conversation, InterruptedMessage } from './Conversation.js';
import { checkSignal } from './checkSignal.js';
import type { Mailbox } from './Mailbox.js';
import type { RunNode } from './RunNode.js';

// Message admission: whether a message sent to a parent agent is refused before it is queued,
// queued, or left to wait on a person's answer, and the `agent.message.waiting` report of each.
// What it changes of the agent (its mailbox, its status, letting it go), the agent does.

/** What message admission borrows from the supervisor (the part of a parent agent's deps it reads). */
export interface AdmissionDeps {
  readonly tree: RunTree;
  readonly clock: Clock;
  readonly events: EventEmitter<SupervisorEvents>;
  /** What is saved, and where (none: nothing is). */
  readonly durability: Durability | undefined;
  readonly mailboxSize: number;
  /** True once the supervisor refuses new work. */
  closed(): boolean;
}

/** A parent agent as its message admission reads it. */
export interface Admitting {
  readonly id: AgentId;
  readonly conversationId: string;
  readonly status: AgentStatus;
  /** The first open question of its current message, when that is suspended. */
  readonly pendingRequest: { readonly request: Request } | undefined;
}

/** What {@link checkCopy} asks of the agent whose copy it checks, once the store answered. */
export interface CheckedCopy {
  /** Whether the agent still waits on the root run checked (nothing is done otherwise). */
  held(): boolean;
  /** Its messages waiting now (none made: undefined). */
  mailbox(): Mailbox | undefined;
  /** The copy is behind what is saved: the agent stops, writing nothing, and is let go, for `why`. */
  letGo(why: string): void;
}

/**
 * Why `agent` (with `mailbox`; none made yet: undefined) refuses `message`, sent with `signal` and
 * `whileSuspended` (both unchecked), before it is queued, if it does: a closed supervisor, a
 * stopped agent, bad input, a message a restart interrupted, an aborted signal, a question waiting
 * (unless sent with `{ whileSuspended: 'queue' }`), a full mailbox. With a store other processes
 * share, whether the question is still open is the store's to say, as the message is queued
 * ({@link checkCopy}). A refusal because a question waits is reported (`agent.message.waiting`,
 * not queued).
 */
export function sendRefusal(
  agent: Admitting,
  mailbox: Mailbox | undefined,
  deps: AdmissionDeps,
  message: unknown,
  signal: AbortSignal | undefined,
  whileSuspended: unknown,
): Error | undefined {
  const waitingOn = agent.pendingRequest?.request;
  const durable = deps.durability?.durable === true;
  const refused = deps.closed()
    ? new ClosedError('the supervisor is closed: create a new one')
    : refusal(agent, mailbox, deps.mailboxSize, message, signal, whileSuspended, durable ? undefined : waitingOn);
  if (refused !== undefined && isTroupeError(refused, 'ERR_AGENT_SUSPENDED') && waitingOn !== undefined) {
    emitWaiting(deps, agent.id, waitingOn.id, false, mailbox?.size ?? 0);
  }
  return refused;
}

// Why the agent refuses the message (its supervisor is open), in the order the checks are made.
function refusal(
  agent: Admitting,
  mailbox: Mailbox | undefined,
  capacity: number,
  message: unknown,
  signal: AbortSignal | undefined,
  whileSuspended: unknown,
  waitingOn: Request | undefined,
): Error | undefined {
  const { id, status } = agent;
  if (status === 'stopped') {
    return new TroupeError(`agent ${id} is stopped: start a new agent`, { code: 'ERR_AGENT_STOPPED' });
  }
  if (typeof message !== 'string') {
    return new InvalidArgumentError(`send(message): message must be a string, got ${describeValue(message)}`);
  }
  if (status === 'interrupted') {
    return new TroupeError(
      `agent ${id} has a message a restart interrupted: call resume() to finish it before sending another`,
      { code: 'ERR_INTERRUPTED' },
    );
  }
  try {
    checkSignal(signal, 'send(message, { signal })');
  } catch (error) {
    return error as Error;
  }
  if (whileSuspended !== undefined && whileSuspended !== 'refuse' && whileSuspended !== 'queue') {
    return new InvalidArgumentError(
      `send(message, { whileSuspended }): pass 'refuse' (the default) or 'queue', got ${describeValue(whileSuspended)}`,
    );
  }
  if (signal?.aborted) return new CancelledError('user', 'the message was aborted before it was sent');
  if (waitingOn !== undefined && whileSuspended !== 'queue') return suspendedError(id, waitingOn);
  if (mailbox?.full ?? capacity <= 0) {
    return new BackpressureError(
      `the mailbox of agent ${id} is full (${capacity} messages waiting): wait for replies or raise mailboxSize`,
      capacity,
    );
  }
  return undefined;
}

/** Why agent `agentId` (in `status`) refuses to resume its interrupted `message`, if it does. */
export function resumeRefusal(
  agentId: AgentId,
  status: AgentStatus,
  message: InterruptedMessage | undefined,
  closed: boolean,
  signal: AbortSignal | undefined,
): Error | undefined {
  if (message === undefined || status !== 'interrupted') {
    return new TroupeError(`agent ${agentId} has no interrupted message to resume (it is ${status})`, {
      code: 'ERR_INVALID_ARGUMENT',
    });
  }
  if (closed) return new ClosedError('the supervisor is closed: create a new one');
  try {
    checkSignal(signal, 'resume({ signal })');
  } catch (error) {
    return error as Error;
  }
  if (signal?.aborted) return new CancelledError('user', 'the resume was aborted before it started');
  return undefined;
}

/**
 * A message sent with `{ whileSuspended: 'queue' }` was queued in `mailbox`: reported when `agent`
 * waits on a question (`agent.message.waiting`, queued, with how many wait).
 */
export function reportQueued(agent: Admitting, mailbox: Mailbox | undefined, deps: AdmissionDeps): void {
  const waitingOn = agent.pendingRequest?.request;
  if (waitingOn !== undefined) emitWaiting(deps, agent.id, waitingOn.id, true, mailbox?.size ?? 0);
}

/**
 * `agent`'s message waits on a question (its {@link Admitting.pendingRequest}, if any) with messages
 * behind it in `mailbox`: those sent without `{ whileSuspended: 'queue' }` are refused
 * (ERR_AGENT_SUSPENDED, naming the question: none waits on a person unless asked to). Each refused
 * is reported, then those still waiting, once.
 */
export function waitBehind(agent: Admitting, mailbox: Mailbox | undefined, deps: AdmissionDeps): void {
  const request = agent.pendingRequest?.request;
  if (request === undefined) return;
  const { queued, refused } = mailbox?.waiting() ?? { queued: 0, refused: 0 };
  if (refused > 0) mailbox?.rejectUnqueued(() => suspendedError(agent.id, request));
  for (let i = 0; i < refused; i++) emitWaiting(deps, agent.id, request.id, false, queued);
  if (queued > 0) emitWaiting(deps, agent.id, request.id, true, queued);
}

/**
 * A message was queued behind `root`'s suspension. With a store other processes share, the answer
 * may be taken there, and what this copy queues would wait for ever: the store is asked as the
 * message is queued (a check in flight answers for what is queued since). While `copy` still waits
 * on `root`, a stale copy refuses what waits, with why (ERR_STORE_FENCED), and is let go; a current
 * one refuses what did not ask to wait on its question ({@link waitBehind}). Without such a store,
 * nothing is asked.
 */
export function checkCopy(
  agent: Admitting,
  root: RunNode,
  conversation: Conversation,
  deps: AdmissionDeps,
  copy: CheckedCopy,
): void {
  conversation.whenBehind(
    root,
    deps.tree.requests.openIdsOf(agent.id),
    (why) => {
      if (!copy.held()) return;
      const stale = `this copy of conversation ${agent.conversationId} is behind what is saved (${why})`;
      const error = new TroupeError(
        `agent ${agent.id}: ${stale}: the message was not sent; startAgent it again to load what is saved, then send`,
        { code: 'ERR_STORE_FENCED' },
      );
      copy.mailbox()?.rejectAll(() => error);
      copy.letGo(`${stale}; startAgent it again to load what is saved`);
    },
    () => {
      if (copy.held()) waitBehind(agent, copy.mailbox(), deps);
    },
  );
}

/**
 * `agent` stopped, for `reason`: the messages waiting in `mailbox` are refused (ERR_AGENT_STOPPED,
 * with why). The error is made only when one waits (4–6 µs with its stack, measured): most stops
 * have none.
 */
export function refuseStopped(agent: Admitting, mailbox: Mailbox | undefined, reason: string): void {
  mailbox?.rejectAll(() => new TroupeError(`agent ${agent.id} is stopped: ${reason}`, { code: 'ERR_AGENT_STOPPED' }));
}

// The error of a message refused because its agent waits on `request` (sent without
// `{ whileSuspended: 'queue' }`): which question, and what to do.
function suspendedError(agentId: AgentId, request: Request): TroupeError {
  const prompt = request.prompt.length > 80 ? `${request.prompt.slice(0, 79)}…` : request.prompt;
  return new TroupeError(
    `agent ${agentId} is waiting on question ${request.id} (${JSON.stringify(prompt)}): answer it with supervisor.answer(${JSON.stringify(request.id)}, answer), or withdraw it with cancel(), then send; or send with { whileSuspended: 'queue' } to have the message wait until it is answered`,
    { code: 'ERR_AGENT_SUSPENDED' },
  );
}

// Messages of `agentId` wait on a person's answer to `requestId` (`agent.message.waiting`): queued,
// or refused; `waiting` of them wait.
function emitWaiting(deps: AdmissionDeps, agentId: AgentId, requestId: string, queued: boolean, waiting: number): void {
  deps.events.emit('agent.message.waiting', { agentId, requestId, queued, waiting, at: deps.clock.now() });
}
