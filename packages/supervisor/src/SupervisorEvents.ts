import type {
  AgentId,
  ApprovalInvalidEvent,
  CancelReason,
  EventsDropped,
  Request,
  ToolExceptionEvent,
  ToolStartEvent,
  ToolStopEvent,
  ToolTimeoutEvent,
} from '@troupe/core';

/** Bytes each channel of a spawn copies to the worker (the live scope-cost figure). */
export interface ChannelBytes {
  readonly scope: number;
  readonly toolContext: number;
  readonly metadata: number;
  readonly total: number;
}

interface At {
  /** When, in the Clock base. */
  readonly at: number;
}

/** The supervisor's typed event map (eventemitter3: name → listener arguments). */
export interface SupervisorEvents {
  'agent.started': [At & { readonly agentId: AgentId; readonly agent: string; readonly conversationId: string }];
  'agent.turn': [At & { readonly agentId: AgentId; readonly turn: number }];
  /** A parent agent's message finished with an answer. */
  'agent.done': [At & { readonly agentId: AgentId; readonly turns: number }];
  /** A failure (tool/model error) or a defect (a bug, a persistence error) of a parent agent's run. */
  'agent.failed': [At & { readonly agentId: AgentId; readonly kind: 'failure' | 'defect'; readonly error: Error }];
  'agent.cancelled': [At & { readonly agentId: AgentId; readonly reason: CancelReason }];
  /** The restart policy restarted the agent from its last saved state. */
  'agent.restarted': [At & { readonly agentId: AgentId; readonly restarts: number }];
  /** The agent was stopped: by `stop()`, or because it restarted too often. */
  'agent.stopped': [At & { readonly agentId: AgentId; readonly reason: string }];
  'tool.execute.start': [ToolStartEvent];
  'tool.execute.stop': [ToolStopEvent];
  'tool.execute.exception': [ToolExceptionEvent];
  'tool.execute.timeout': [ToolTimeoutEvent];
  'tool.approval.invalid': [ApprovalInvalidEvent];
  'subagent.spawned': [
    At & {
      readonly agentId: AgentId;
      readonly parentAgentId: AgentId | undefined;
      readonly agent: string;
      readonly resumed: boolean;
      readonly bytes: ChannelBytes;
    },
  ];
  'subagent.done': [
    At & { readonly agentId: AgentId; readonly parentAgentId: AgentId | undefined; readonly turns: number },
  ];
  'subagent.failed': [
    At & { readonly agentId: AgentId; readonly parentAgentId: AgentId | undefined; readonly error: Error },
  ];
  'subagent.crashed': [
    At & {
      readonly agentId: AgentId;
      readonly parentAgentId: AgentId | undefined;
      readonly exitCode: number | null;
      readonly error: Error;
    },
  ];
  'subagent.cancelled': [
    At & {
      readonly agentId: AgentId;
      readonly parentAgentId: AgentId | undefined;
      readonly reason: CancelReason;
      readonly forced: boolean;
    },
  ];
  'subagent.incomplete': [
    At & { readonly agentId: AgentId; readonly parentAgentId: AgentId | undefined; readonly turns: number },
  ];
  'subagent.suspended': [
    At & { readonly agentId: AgentId; readonly parentAgentId: AgentId | undefined; readonly requestId: string },
  ];
  /** A request reached the host: one per question, whatever depth it came from. */
  'request.opened': [At & { readonly request: Request; readonly agentId: AgentId; readonly path: readonly AgentId[] }];
  'request.answered': [At & { readonly requestId: string; readonly agentId: AgentId; readonly ok: boolean }];
  'context.events_dropped': [At & { readonly agentId: AgentId; readonly dropped: EventsDropped }];
}
