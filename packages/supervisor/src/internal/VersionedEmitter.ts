import { EventEmitter } from 'eventemitter3';
import type { SupervisorEvents } from '../SupervisorEvents.js';

/**
 * The supervisor's event emitter, which counts every change of its listeners:
 * the run tree asks "does anyone listen to X?" on every run, and caches the
 * answer until {@link VersionedEmitter.listenersVersion} moves.
 */
export class VersionedEmitter extends EventEmitter<SupervisorEvents> {
  #version = 0;

  /** Bumped on every listener change. */
  get listenersVersion(): number {
    return this.#version;
  }

  override on<T extends keyof SupervisorEvents>(
    event: T,
    fn: (...args: SupervisorEvents[T]) => void,
    context?: unknown,
  ): this {
    this.#version++;
    return super.on(event, fn as never, context);
  }

  override addListener<T extends keyof SupervisorEvents>(
    event: T,
    fn: (...args: SupervisorEvents[T]) => void,
    context?: unknown,
  ): this {
    this.#version++;
    return super.addListener(event, fn as never, context);
  }

  override once<T extends keyof SupervisorEvents>(
    event: T,
    fn: (...args: SupervisorEvents[T]) => void,
    context?: unknown,
  ): this {
    this.#version++;
    return super.once(event, fn as never, context);
  }

  override off<T extends keyof SupervisorEvents>(
    event: T,
    fn?: (...args: SupervisorEvents[T]) => void,
    context?: unknown,
    once?: boolean,
  ): this {
    this.#version++;
    return super.off(event, fn as never, context, once);
  }

  override removeListener<T extends keyof SupervisorEvents>(
    event: T,
    fn?: (...args: SupervisorEvents[T]) => void,
    context?: unknown,
    once?: boolean,
  ): this {
    this.#version++;
    return super.removeListener(event, fn as never, context, once);
  }

  override removeAllListeners(event?: keyof SupervisorEvents): this {
    this.#version++;
    return super.removeAllListeners(event);
  }
}
