import type { EventsDropped } from './ContextUpdate.js';
import type { AgentId } from './Id.js';
import type { ModelEvents } from './ModelEvents.js';
import type { ToolEventSink, ToolEvents } from './ToolEvents.js';

/**
 * Agent-level events of the loop.
 *
 * The supervisor re-emits them (with where they came from); listen there, not on the loop.
 *
 * @example
 * ```ts
 * const onTurn = (...[event]: LoopEvents['agent.turn']) => console.log(`${event.agentId} turn ${event.turn}`)
 * ```
 */
export interface LoopEvents extends ToolEvents, ModelEvents {
  'agent.turn': [{ readonly agentId: AgentId; readonly turn: number; readonly at: number }];
  'context.events_dropped': [{ readonly agentId: AgentId; readonly dropped: EventsDropped; readonly at: number }];
}

/** The part of an eventemitter3 emitter the loop needs. */
export interface LoopEventSink extends ToolEventSink {
  emit<K extends keyof LoopEvents>(event: K, ...args: LoopEvents[K]): boolean;
  listenerCount(event: keyof LoopEvents): number;
}
