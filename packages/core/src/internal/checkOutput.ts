import type { AgentOutput } from '../AgentOutput.js';
import { findNotJson } from '../ContextUpdate.js';
import { type LoopState, sealMessage } from '../LoopState.js';
import { TroupeError } from '../TroupeError.js';

/** What a final answer came to against the agent's `output` schema. */
export type OutputCheck =
  | { readonly ok: true; readonly value: unknown }
  /** `problem` says where and what, for the model and the error; `retry`: the model can fix it. */
  | { readonly ok: false; readonly problem: string; readonly retry: boolean };

/**
 * Read a final answer as the agent's structured output: its text parsed as
 * JSON, then checked by the schema; what the schema returns must be plain
 * JSON again (it crosses threads and is saved), which a model cannot fix.
 */
export function checkOutput(output: AgentOutput, content: string): OutputCheck {
  let json: unknown;
  try {
    json = JSON.parse(content);
  } catch (error) {
    return { ok: false, problem: `the answer is not JSON (${(error as Error).message})`, retry: true };
  }
  const parsed = output.schema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return {
      ok: false,
      problem: `at ${pathOf(issue?.path ?? [])}: ${issue?.message ?? 'invalid'}`,
      retry: true,
    };
  }
  const bad = findNotJson(parsed.data, 'output');
  if (bad !== undefined) {
    return {
      ok: false,
      problem: `the output schema returned ${bad.what} at ${bad.path}: give the agent a schema whose result is plain JSON (no transforms to dates, maps or classes)`,
      retry: false,
    };
  }
  return { ok: true, value: parsed.data };
}

/** The state with the model told what was wrong with its answer, to answer again. */
export function askAgain(state: LoopState, problem: string): LoopState {
  return {
    ...state,
    messages: [
      ...state.messages,
      sealMessage({
        role: 'user',
        content: `Your answer does not match the required output: ${problem}. Answer again with only the JSON value, matching the schema.`,
      }),
    ],
  };
}

/** The run's error once the answers ran out (or the schema's result cannot be saved). */
export function outputError(problem: string, answers: number, retry: boolean): TroupeError {
  return retry
    ? new TroupeError(
        `the final answer did not match the agent's output schema (${answers} ${answers === 1 ? 'answer' : 'answers'}): ${problem}`,
        { code: 'ERR_OUTPUT_INVALID' },
      )
    : new TroupeError(problem, { code: 'ERR_NOT_JSON' });
}

/** A schema issue's path as a value path: `output.items[0].price`. */
function pathOf(path: readonly PropertyKey[]): string {
  let at = 'output';
  for (const key of path) {
    if (typeof key === 'number') at += `[${key}]`;
    else if (typeof key === 'string' && /^[A-Za-z_$][\w$]*$/.test(key)) at += `.${key}`;
    else at += `[${JSON.stringify(String(key))}]`;
  }
  return at;
}
