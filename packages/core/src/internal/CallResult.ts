import { findUncloneable } from '../assertCloneable.js';
import { findNotJson, type Operation } from '../ContextUpdate.js';
import type { ToolExecution } from '../executeTool.js';
import type { ModelToolCall, ToolMessage } from '../Model.js';
import type { Request } from '../Request.js';
import { TroupeError } from '../TroupeError.js';
import { errorContent } from './errorContent.js';

/** What one tool call of a turn came to: its tool message, or the question it asks. */
export interface CallResult {
  readonly message: ToolMessage;
  readonly operations: readonly Operation[] | undefined;
  readonly request: Request | undefined;
  readonly approval: boolean;
  readonly failed: boolean;
  readonly delegated?: boolean | undefined;
}

/** The result of a call from its execution: a value that cannot cross a thread or be written as JSON is an error result. */
export function toCallResult(call: ModelToolCall, execution: ToolExecution): CallResult {
  switch (execution.status) {
    case 'ok': {
      const bad = findUncloneable(execution.value, 'result');
      if (bad !== undefined) {
        const error = new TroupeError(
          `tool "${call.name}" returned a value that cannot cross a thread: ${bad.path} is ${bad.what}; return plain data`,
          { code: 'ERR_NOT_CLONEABLE' },
        );
        return {
          message: { role: 'tool', toolCallId: call.id, name: call.name, content: errorContent(error), isError: true },
          operations: undefined,
          request: undefined,
          approval: false,
          failed: true,
        };
      }
      let content = execution.value ?? null;
      if (findNotJson(content, 'result', { undefinedPropertiesAreAbsent: true }) !== undefined) {
        // The transcript is saved, and read by models, as JSON: what the model would be shown of a
        // Date (its ISO string), an undefined in a list (null) is what the transcript keeps.
        try {
          content = JSON.parse(JSON.stringify(content)) ?? null;
        } catch (error) {
          const refused = new TroupeError(
            `tool "${call.name}" returned a value JSON cannot write (${(error as Error)?.message ?? String(error)}): return plain data`,
            { code: 'ERR_NOT_JSON' },
          );
          return {
            message: {
              role: 'tool',
              toolCallId: call.id,
              name: call.name,
              content: errorContent(refused),
              isError: true,
            },
            operations: undefined,
            request: undefined,
            approval: false,
            failed: true,
          };
        }
      }
      return {
        message: {
          role: 'tool',
          toolCallId: call.id,
          name: call.name,
          content,
          isError: false,
        },
        operations: execution.update?.operations,
        request: undefined,
        approval: false,
        failed: false,
      };
    }
    case 'error':
      return {
        message: {
          role: 'tool',
          toolCallId: call.id,
          name: call.name,
          content: errorContent(execution.error),
          isError: true,
        },
        operations: execution.update?.operations,
        request: undefined,
        approval: false,
        failed: true,
      };
    case 'pending':
      return {
        message: { role: 'tool', toolCallId: call.id, name: call.name, content: null, isError: false },
        operations: undefined,
        request: execution.request,
        approval: execution.approval,
        failed: false,
      };
  }
}
