import type {
  AgentId,
  CancelReason,
  Message,
  Metadata,
  ModelDelta,
  Request,
  SessionEvent,
  Todo,
  Usage,
} from '@troupe/core';
import type { DoneOutput } from './SubagentOutcome.js';

/** What every reply says about tokens: the message's own model calls, and its whole tree's. */
interface ReplyUsage {
  /** Tokens this agent's own model calls used for the message. */
  readonly usage: Usage;
  /** Tokens of the message's whole run tree: this agent and every subagent under it. */
  readonly totalUsage: Usage;
}

/**
 * What a parent agent's message ended with. A union discriminated on `status`.
 * `O` is the agent's structured output: a `done` reply's `output`, what its
 * `output` schema made of the answer (see `defineAgent`).
 *
 * @example
 * ```ts
 * const handle = await supervisor.startAgent(agent, { scope: {} })
 * const reply: AgentReply = await handle.send('Refund order 42')
 * if (reply.status === 'suspended') await supervisor.answer(reply.request.id, { id: reply.request.id, ok: true })
 * ```
 */
export type AgentReply<O = unknown> =
  | (ReplyUsage & DoneOutput<O> & { readonly status: 'done'; readonly text: string; readonly turns: number })
  | (ReplyUsage & {
      readonly status: 'suspended';
      /** The first open question of the message's tree (every open one: `pendingRequests()`). */
      readonly request: Request;
      /** Agent ids from this agent down to the one whose tool asked. */
      readonly path: readonly AgentId[];
    })
  | (ReplyUsage & {
      readonly status: 'failed';
      readonly error: Error;
      /** True when the restart policy restarted the agent; false when it stopped it. */
      readonly restarted: boolean;
    })
  | (ReplyUsage & { readonly status: 'cancelled'; readonly reason: CancelReason })
  | (ReplyUsage & { readonly status: 'incomplete'; readonly turns: number });

/**
 * Where a parent agent is in its life. `interrupted`: restored after a crash
 * with a message that was mid-turn; `resume()` finishes it.
 *
 * @example
 * ```ts
 * const handle = await supervisor.startAgent(agent, { scope: {} })
 * const status: AgentStatus = handle.status
 * if (status === 'interrupted') await handle.resume()
 * ```
 */
export type AgentStatus = 'idle' | 'running' | 'suspended' | 'interrupted' | 'stopped';

/**
 * A read-only copy of a parent agent's state.
 *
 * A copy: reading it never blocks the agent, and it does not change afterwards.
 *
 * @example
 * ```ts
 * const handle = await supervisor.startAgent(agent, { scope: {} })
 * const snapshot: AgentSnapshot = handle.snapshot()
 * console.log(snapshot.status, snapshot.turns, snapshot.totalUsage.outputTokens)
 * ```
 */
export interface AgentSnapshot {
  readonly agentId: AgentId;
  readonly status: AgentStatus;
  readonly messages: readonly Message[];
  readonly todos: readonly Todo[];
  readonly metadata: Metadata;
  readonly events: readonly SessionEvent[];
  readonly turns: number;
  /** Tokens of this agent's own model calls over the conversation. */
  readonly usage: Usage;
  /** Tokens of the conversation's whole run trees: this agent and its subagents. */
  readonly totalUsage: Usage;
  /** The first open request when suspended. */
  readonly pendingRequest: Request | undefined;
}

/** Where a streamed delta came from. */
interface ChunkSource {
  readonly agentId: AgentId;
  readonly runId: string;
  /** Agent ids from the parent agent down to the one whose model wrote it. */
  readonly path: readonly AgentId[];
}

/**
 * One streamed piece of a message's run tree (a model delta, with where it came from).
 *
 * @example
 * ```ts
 * const handle = await supervisor.startAgent(agent, { scope: {} })
 * const stream = handle.stream('Draft the summary')
 * for await (const chunk of stream satisfies AsyncIterable<StreamChunk>) {
 *   if (chunk.type === 'text') process.stdout.write(chunk.text)
 * }
 * const reply = await stream.reply
 * ```
 */
export type StreamChunk = ChunkSource & ModelDelta;

/**
 * Options of {@link AgentHandle.send}.
 *
 * `whileSuspended` says what a message does when its agent is waiting on a
 * question (a reply came back `suspended` and nobody has answered it yet):
 * - `'refuse'` (default): the message is refused with `ERR_AGENT_SUSPENDED`,
 *   naming the question and how to answer it — also a message that was
 *   waiting behind a running one when that one suspended. Nothing waits on a
 *   person unless it was asked to.
 * - `'queue'`: the message waits in the mailbox and runs once the question is
 *   answered (`supervisor.answer`) or withdrawn (`cancel()`); a script that
 *   never answers never gets its reply.
 *
 * Either way the supervisor emits `agent.message.waiting` (`queued` true or
 * false): the waiting is visible, never silent.
 *
 * @example
 * ```ts
 * const handle = await supervisor.startAgent(agent, { scope: {} })
 * const options: SendOptions = { signal: AbortSignal.timeout(60_000), whileSuspended: 'queue' }
 * const reply = await handle.send('And then?', options)
 * ```
 */
export interface SendOptions {
  /** Aborting it cancels this message only (its listener is removed when the message settles). */
  readonly signal?: AbortSignal | undefined;
  /** What the message does when its agent waits on a question: `'refuse'` (default) or `'queue'`. */
  readonly whileSuspended?: 'refuse' | 'queue' | undefined;
}

/**
 * Options of {@link AgentHandle.stream}: those of `send`, and how many chunks are kept.
 *
 * @example
 * ```ts
 * const handle = await supervisor.startAgent(agent, { scope: {} })
 * const options: StreamOptions = { signal: AbortSignal.timeout(60_000), highWaterMark: 256 }
 * for await (const chunk of handle.stream('Draft the summary', options)) console.log(chunk.type)
 * ```
 */
export interface StreamOptions extends SendOptions {
  /** Chunks kept while the consumer is slow; past it the oldest text is merged (default 1024 chunks). */
  readonly highWaterMark?: number | undefined;
}

/**
 * A parent agent, as the host holds it: an actor with a mailbox. Messages are
 * processed one at a time, in order; different agents run concurrently. `O`
 * is its structured output (its replies' `output`).
 *
 * @example
 * ```ts
 * const handle: AgentHandle = await supervisor.startAgent(agent, { scope: { userId: 'u1' } })
 * const reply = await handle.send('Summarise the open incidents', { signal: AbortSignal.timeout(120_000) })
 * if (reply.status === 'done') console.log(reply.text)
 * await handle.stop()
 * ```
 */
export interface AgentHandle<O = unknown> {
  readonly id: AgentId;
  readonly name: string;
  readonly conversationId: string;
  readonly status: AgentStatus;
  /**
   * Run a turn of the agent loop with `message` as the user's input.
   * Resolves with the reply once nothing of the message's run tree runs any
   * more (a suspension resolves it too: answer the request with
   * `supervisor.answer`). Rejects with a `BackpressureError` when the
   * mailbox is full, a `ClosedError` after close, an `ERR_AGENT_STOPPED`
   * error once stopped, a `CancelledError` when `signal` is already aborted.
   * Aborting `signal` later cancels this message only (its listener is
   * removed when the message settles).
   *
   * While the agent waits on a question (its last reply was `suspended`), a
   * message is refused with `ERR_AGENT_SUSPENDED` naming the question —
   * answer it, or `cancel()` to withdraw it, then send — unless it is sent
   * with `{ whileSuspended: 'queue' }`: it then waits until the question is
   * answered or withdrawn. Either way `agent.message.waiting` is emitted.
   * With a durable store the store is asked first whether the question is
   * still open: a copy another process moved on refuses with `ERR_STORE_FENCED`.
   */
  send(message: string, options?: SendOptions): Promise<AgentReply<O>>;
  /**
   * Like `send`, read as it is written: the tokens of this agent's model and
   * of every subagent under it, in order per run, batched across threads.
   * The iterator ends when the reply is ready; `reply` resolves with it.
   *
   * @example
   * ```ts
   * const stream = agent.stream('Summarise the incident')
   * for await (const chunk of stream) if (chunk.type === 'text') process.stdout.write(chunk.text)
   * const reply = await stream.reply
   * ```
   */
  stream(
    message: string,
    options?: StreamOptions,
  ): AsyncIterableIterator<StreamChunk> & { readonly reply: Promise<AgentReply<O>> };
  /**
   * Cancel the running message — its whole run tree: the reply comes once
   * every run under it has stopped — or withdraw the open request when
   * suspended. Returns false when there was nothing to cancel.
   */
  cancel(reason?: CancelReason): boolean;
  /**
   * Finish the message a crash interrupted (status `interrupted`), from its
   * last saved turn. Its tool calls that had started and never committed are
   * not re-run — the model gets an `ERR_INTERRUPTED` error result for each —
   * unless their tool is `idempotent`. Rejects when there is nothing to resume.
   */
  resume(options?: { readonly signal?: AbortSignal }): Promise<AgentReply<O>>;
  snapshot(): AgentSnapshot;
  /** Cancel what runs, refuse further messages, persist. Idempotent. */
  stop(): Promise<void>;
}
