// The model of the MCP test agents: the run's input is a JSON list of tool
// calls, made one per turn; the answer is the JSON of every result the model
// saw (name, isError, content), so a test reads what the agent's model got.
import { ScriptedModel } from '@troupe/core/testing';

/** One call the model is told to make. */
export interface PlannedCall {
  readonly tool: string;
  readonly args?: Record<string, unknown>;
}

/** What the model saw of one call. */
export interface SeenResult {
  readonly name: string;
  readonly isError: boolean;
  // biome-ignore lint/suspicious/noExplicitAny: results are read field by field in assertions.
  readonly content: any;
}

/** The input of a run that makes these calls in order. */
export const plan = (...calls: PlannedCall[]): string => JSON.stringify(calls);

/** The results an answer of {@link callerModel} reports. */
export const seen = (answer: unknown): SeenResult[] => JSON.parse(String(answer)) as SeenResult[];

export function callerModel(): ScriptedModel {
  return new ScriptedModel(
    [
      ({ messages, toolResults }) => {
        const input = messages.find((m) => m.role === 'user')?.content ?? '[]';
        const calls = JSON.parse(input) as PlannedCall[];
        const next = calls[toolResults.length];
        if (next !== undefined) return { toolCalls: [{ name: next.tool, arguments: next.args ?? {} }] };
        return JSON.stringify(
          toolResults.map((r): SeenResult => ({ name: r.name, isError: r.isError, content: r.content })),
        );
      },
    ],
    { whenExhausted: 'repeat-last' },
  );
}

/** Deadlines of the fixture server's tools, as the tests need them. */
export const DEADLINES = { hang: { timeoutMs: 400 }, slow: { timeoutMs: null } } as const;

/** Where the test's observer listens (`host:port`): set before an agent module is imported. */
export const OBSERVER_VARIABLE = 'TROUPE_TEST_MCP_OBSERVER';
