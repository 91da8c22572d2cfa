import type { ScriptedReply, ScriptInput } from '@troupe/core/testing';
import { lastUserMessage } from './lastUserMessage.js';

/** A failed task as the model sees it: the error's message and code. */
export interface TaskError {
  readonly error: string;
  readonly code?: string;
}

/** One delegated task's result as a delegating agent reports it. */
export type TaskReport = { readonly ok: string } | { readonly error: TaskError };

/**
 * The script of a delegating parent, as one step read from the transcript
 * (so one step serves every message): each line `<subagent>: <instructions>`
 * of the user's message becomes a `task` call, all in one turn; once the
 * results are back, the answer is a JSON array of {@link TaskReport}s in line
 * order.
 */
export function delegateLines({ messages, lastToolResults }: ScriptInput): ScriptedReply {
  // The last message is a tool result: the delegated tasks are back.
  if (messages[messages.length - 1]?.role === 'tool') {
    return JSON.stringify(
      lastToolResults.map(
        (r): TaskReport => (r.isError ? { error: r.content as TaskError } : { ok: String(r.content) }),
      ),
    );
  }
  const toolCalls = lastUserMessage(messages)
    .split('\n')
    .map((line) => line.split(':'))
    .filter((parts) => parts.length >= 2)
    .map(([subagent = '', ...rest]) => ({
      name: 'task',
      arguments: { subagent: subagent.trim(), instructions: rest.join(':').trim() },
    }));
  return toolCalls.length === 0 ? 'nothing to delegate' : { toolCalls };
}
