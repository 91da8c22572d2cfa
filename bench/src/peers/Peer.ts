// What the peers suite asks of each library: the same scripted workloads, a fake model, no network.

/** When a checking tool stopped (epoch ms) and whether it saw the cancel. */
export interface ToolStop {
  readonly stoppedAt: number;
  readonly sawCancel: boolean;
}

/** One library driven through its own agent loop with a scripted model. */
export interface Peer {
  /** e.g. `OpenAI Agents JS`. */
  readonly name: string;
  /** `package@version` of what was measured. */
  readonly version: string;
  /** The model asks one call of a trivial tool, then answers with text. */
  trivial(): Promise<void>;
  /** One model turn asks `calls` calls of a tool that burns `iterations`, then the model answers. */
  fanout(calls: number, iterations: number): Promise<void>;
  /**
   * One call of a tool that burns up to `iterations`, checking the library's abort signal between
   * chunks; the run is given `signal`. Resolves (or rejects, as the library does) when the run ends;
   * `onStop` is called when the tool stopped.
   */
  cancellable(iterations: number, signal: AbortSignal, onStop: (stop: ToolStop) => void): Promise<void>;
  /** One call of a tool that burns `iterations` without checking anything, under the library's deadline of `deadlineMs`. */
  neverYields(iterations: number, deadlineMs: number): Promise<void>;
  /** What the library holds while a tool waits for a person (observed by running it once). */
  question(): Promise<string>;
}
