import type { Model, ModelRequest, ModelResponse } from '../Model.js';
import type { ModelFactory } from '../ModelFactory.js';
import { TroupeError } from '../TroupeError.js';
import { describeValue } from './describeValue.js';

/**
 * The model of an agent defined with a {@link ModelFactory}: the factory is
 * called on the thread that uses the model, the first time it does, and its
 * model kept for every later call on that thread. The agent object exists once
 * per thread (each thread imports the agent's module), so this object — and
 * what it keeps — is per thread too.
 *
 * Nothing here calls the factory except {@link FactoryModel.prime} and
 * `generate`: reading `name` or `provider` (the supervisor thread does, for
 * events about subagents that run elsewhere) never builds a model there.
 */
export class FactoryModel implements Model {
  readonly #agent: string;
  readonly #factory: ModelFactory;
  /** The model the factory made on this thread. */
  #model: Model | undefined;
  /** The factory's promise while an async factory runs (concurrent first calls share it). */
  #building: Promise<Model> | undefined;
  /** What a sync factory threw at `prime`, for the `generate` after it (then forgotten: the next run calls it again). */
  #failed: TroupeError | undefined;

  constructor(agent: string, factory: ModelFactory) {
    this.#agent = agent;
    this.#factory = factory;
  }

  /** The made model's name; `undefined` until this thread made it. */
  get name(): string | undefined {
    return this.#model?.name;
  }

  /** The made model's provider; `undefined` until this thread made it. */
  get provider(): string | undefined {
    return this.#model?.provider;
  }

  /**
   * Make the model now if it is not made yet, before a run's first turn (so a
   * synchronous factory's model names that turn's events). A failure is kept
   * for the `generate` that follows: the run fails there, as from a model call.
   */
  prime(): void {
    if (this.#model !== undefined || this.#building !== undefined || this.#failed !== undefined) return;
    try {
      this.#made(this.#call());
    } catch (error) {
      this.#failed = error as TroupeError;
    }
  }

  generate(request: ModelRequest): Promise<ModelResponse> {
    const model = this.#model;
    if (model !== undefined) return model.generate(request);
    const failed = this.#failed;
    if (failed !== undefined) {
      this.#failed = undefined;
      return Promise.reject(failed);
    }
    try {
      if (this.#building === undefined) this.#made(this.#call());
    } catch (error) {
      return Promise.reject(error);
    }
    const made = this.#model as Model | undefined;
    if (made !== undefined) return made.generate(request);
    return (this.#building as unknown as Promise<Model>).then((m) => m.generate(request));
  }

  // Call the factory; a throw becomes the typed error.
  #call(): unknown {
    try {
      return this.#factory();
    } catch (error) {
      throw this.#error('threw', error);
    }
  }

  // Keep what the factory returned: a model at once, a promise once it settles (a rejection is not kept).
  #made(result: unknown): void {
    if (typeof (result as PromiseLike<unknown> | null)?.then === 'function' && !isModel(result)) {
      const building = Promise.resolve(result as PromiseLike<unknown>).then(
        (value) => {
          this.#building = undefined;
          this.#model = this.#checked(value);
          return this.#model;
        },
        (error: unknown) => {
          this.#building = undefined;
          throw this.#error('rejected', error);
        },
      );
      // Whoever calls generate gets the rejection; a prime with no generate after it must not leave it unhandled.
      building.catch(() => {});
      this.#building = building;
      return;
    }
    this.#model = this.#checked(result);
  }

  #checked(value: unknown): Model {
    if (isModel(value)) return value;
    throw new TroupeError(
      `agent "${this.#agent}": its model factory${this.#named()} returned ${describeValue(value)}, not a model: return an object with generate({ messages, tools, signal }), such as openaiModel({ ... }) or aiSdkModel(...)`,
      { code: 'ERR_MODEL_FACTORY' },
    );
  }

  #error(how: 'threw' | 'rejected', error: unknown): TroupeError {
    const why = error instanceof Error ? error.message : describeValue(error);
    return new TroupeError(
      `agent "${this.#agent}": its model factory${this.#named()} ${how}: ${why} — it runs on the thread that runs the agent, at the agent's first model call there, and reads that thread's environment as it is then: fix what it reads (set the variable or start the server before the agent's first message); the next run calls it again`,
      { code: 'ERR_MODEL_FACTORY', cause: error },
    );
  }

  // The factory's own name, when it has one worth showing (an inline arrow is named after the `model` key).
  #named(): string {
    const name = this.#factory.name;
    return name === '' || name === 'model' ? '' : ` ${name}()`;
  }
}

function isModel(value: unknown): value is Model {
  return typeof value === 'object' && value !== null && typeof (value as Model).generate === 'function';
}
