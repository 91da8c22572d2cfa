import { InvalidArgumentError } from '@troupe/core';
import type { ParentAgent } from './ParentAgent.js';

/**
 * The parent agents a supervisor holds, by id: every one with work (running,
 * suspended, queued) and up to `maxIdle` idle ones, least recently used let
 * go first. An agent let go is held only by the handles the host kept: while
 * one lives it is still that agent (its id stays taken); once collected, its
 * id is free and a `startAgent` restores it from the store. Ids being started
 * (loaded from the store) are taken too. Without a store nothing is let go.
 */
export class AgentRegistry {
  readonly #maxIdle: number;
  readonly #lets: boolean;
  /** Agents held: every one with work and up to `maxIdle` idle ones. */
  readonly #agents = new Map<string, ParentAgent>();
  /**
   * Idle agents held, least recently used first (a subset of #agents; kept only when they may be let
   * go): a list through the agents' own `idleOlder` and `idleNewer` fields, not a Set (an entry per idle agent in a
   * hash table that a move to its end leaves a hole in: 30–65 B an agent, where two fields are 16).
   */
  #oldestIdle: ParentAgent | undefined;
  #newestIdle: ParentAgent | undefined;
  #idleCount = 0;
  /** Agents let go while idle: alive as long as the host holds their handles. */
  readonly #released = new Map<string, WeakRef<ParentAgent>>();
  readonly #collected = new FinalizationRegistry<string>((id) => {
    const ref = this.#released.get(id);
    if (ref !== undefined && ref.deref() === undefined) this.#released.delete(id);
  });
  /** Agent ids being started (loaded from the store) right now. */
  readonly #starting = new Set<string>();

  /** `letsGo`: whether idle agents past the bound may be let go (a store can restore them). */
  constructor(maxIdle: number, letsGo: boolean) {
    this.#maxIdle = maxIdle;
    this.#lets = letsGo;
  }

  /** Agents held. */
  get size(): number {
    return this.#agents.size;
  }

  /** The agents held, in the order they were added. */
  values(): IterableIterator<ParentAgent> {
    return this.#agents.values();
  }

  /** A held agent. */
  held(id: string): ParentAgent | undefined {
    return this.#agents.get(id);
  }

  /** An agent by id: held, or let go and still alive in a handle the host kept. */
  get(id: string): ParentAgent | undefined {
    return this.#agents.get(id) ?? this.#released.get(id)?.deref();
  }

  /**
   * Take `id` for an agent being started: free, or held by an idle agent nobody
   * holds any more (restored anew from the store). Throws when it is taken.
   * {@link AgentRegistry.started} or {@link AgentRegistry.abandoned} ends it.
   */
  take(id: string): void {
    if (this.#starting.has(id) || this.#agents.has(id)) {
      throw new InvalidArgumentError(
        `agent ${id} is already started: use its handle (supervisor.agent(id)); agent ids are unique per supervisor, across tenants and conversations, so another tenant's conversation needs an id of its own (for example "<tenant>:<name>")`,
      );
    }
    if (this.#released.get(id)?.deref() !== undefined) {
      // Still alive in a handle the host kept: it is that agent, not a second one.
      throw new InvalidArgumentError(`agent ${id} is already started: use its handle (supervisor.agent(id))`);
    }
    this.#released.delete(id);
    this.#starting.add(id);
  }

  /** The start of `id` failed: the id is free again. */
  abandoned(id: string): void {
    this.#starting.delete(id);
  }

  /** `agent` started: held from now on. */
  started(agent: ParentAgent): void {
    this.#starting.delete(agent.id);
    this.#agents.set(agent.id, agent);
    if (agent.status === 'idle') this.idle(agent);
  }

  /** An agent with nothing to do: held among the idle ones, the least recently used let go past the bound. */
  idle(agent: ParentAgent): void {
    // Without a store nothing is let go: no order of idle agents to keep.
    if (!this.#lets || this.#agents.get(agent.id) !== agent || agent.status !== 'idle') return;
    this.#unlinkIdle(agent);
    agent.idleOlder = this.#newestIdle;
    if (this.#newestIdle === undefined) this.#oldestIdle = agent;
    else this.#newestIdle.idleNewer = agent;
    this.#newestIdle = agent;
    this.#idleCount++;
    while (this.#idleCount > this.#maxIdle) {
      const oldest = this.#oldestIdle as ParentAgent;
      this.#unlinkIdle(oldest);
      if (oldest.status !== 'idle') continue;
      this.#agents.delete(oldest.id);
      this.#released.set(oldest.id, new WeakRef(oldest));
      this.#collected.register(oldest, oldest.id);
    }
  }

  /** An agent let go while idle got work again (the host still held it): held again. */
  busy(agent: ParentAgent): void {
    this.#unlinkIdle(agent);
    if (this.#agents.get(agent.id) === agent) return;
    this.#released.delete(agent.id);
    this.#agents.set(agent.id, agent);
  }

  /** Forget `agent` (stopped, or stale): its id is free. */
  forget(agent: ParentAgent): void {
    if (this.#agents.get(agent.id) === agent) this.#agents.delete(agent.id);
    this.#unlinkIdle(agent);
    if (this.#released.get(agent.id)?.deref() === agent) this.#released.delete(agent.id);
  }

  /** Forget every agent (a closed supervisor holds none). */
  clear(): void {
    this.#agents.clear();
    while (this.#oldestIdle !== undefined) this.#unlinkIdle(this.#oldestIdle);
    this.#released.clear();
  }

  // Out of the idle order, if it is in it.
  #unlinkIdle(agent: ParentAgent): void {
    const older = agent.idleOlder;
    const newer = agent.idleNewer;
    if (older === undefined && this.#oldestIdle !== agent) return;
    if (older === undefined) this.#oldestIdle = newer;
    else older.idleNewer = newer;
    if (newer === undefined) this.#newestIdle = older;
    else newer.idleOlder = older;
    agent.idleOlder = agent.idleNewer = undefined;
    this.#idleCount--;
  }
}
