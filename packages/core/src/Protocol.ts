import { z } from 'zod';
import type { LoopState } from './AgentLoop.js';
import type { Operation, SessionEvent } from './ContextUpdate.js';
import { ErrorShape } from './ErrorShape.js';
import { Answer, Request } from './Request.js';

/**
 * The one closed, versioned protocol between the supervisor and a worker.
 * Schema and type share a name; each side parses what arrives at its port
 * and dispatches with an exhaustive switch.
 */
export const PROTOCOL_VERSION = 1;

/** Names an agent across threads: the module that exports it, and its name. */
export const AgentRef = z.object({ module: z.string().min(1), name: z.string().min(1) });
/** See the {@link AgentRef} schema. */
export type AgentRef = z.infer<typeof AgentRef>;

/** A cancellation-table slot: index and the generation it was allocated with. */
export const SlotRef = z.object({ index: z.number().int().nonnegative(), generation: z.number().int().nonnegative() });

const UsageSchema = z.object({ inputTokens: z.number(), outputTokens: z.number() });

// The loop state is produced by this library on the other side and its
// parts are re-checked where they are used (operations by the reducer,
// answers against the pending request); here its outer shape is checked.
const LoopStateSchema = z.custom<LoopState>(
  (v) =>
    typeof v === 'object' &&
    v !== null &&
    typeof (v as LoopState).agentId === 'string' &&
    Array.isArray((v as LoopState).messages) &&
    typeof (v as LoopState).metadata === 'object',
  { message: 'not a loop state' },
);

/**
 * Supervisor → worker: run (or resume) one subagent. Everything a run
 * needs crosses in this one message; functions never do.
 */
export const SubagentTask = z.object({
  v: z.literal(PROTOCOL_VERSION),
  runId: z.string().min(1),
  agent: AgentRef,
  agentId: z.string().min(1),
  parentAgentId: z.string().min(1).optional(),
  /** Agent ids from the root to this agent's parent. */
  ancestry: z.array(z.string()),
  /** The task's instructions (a fresh run's user message). */
  input: z.string().optional(),
  scope: z.unknown(),
  /** Serialized size of the scope, measured on the sending side. */
  scopeBytes: z.number().int().nonnegative(),
  toolContext: z.record(z.string(), z.unknown()),
  metadata: z.record(z.string(), z.unknown()),
  slot: SlotRef,
  /** Absolute deadline in the Clock base, or null. */
  deadline: z.number().finite().nullable(),
  /** Resume a suspended run: its state, the answer, and the calls the supervisor approved. */
  resume: z.object({ state: LoopStateSchema, answer: Answer, approvedCalls: z.array(z.string()) }).optional(),
  /** What the host channel offers this run. */
  host: z.object({ approval: z.boolean(), telemetry: z.boolean(), spawn: z.boolean() }),
});
/** See the {@link SubagentTask} schema. */
export type SubagentTask = z.infer<typeof SubagentTask>;

const OperationSchema = z.custom<Operation>(
  (v) => typeof v === 'object' && v !== null && typeof (v as { op?: unknown }).op === 'string',
  { message: 'not an operation' },
);
const SessionEventSchema = z.custom<SessionEvent>(
  (v) =>
    typeof v === 'object' &&
    v !== null &&
    typeof (v as SessionEvent).type === 'string' &&
    typeof (v as SessionEvent).agentId === 'string',
  { message: 'not a session event' },
);

const common = {
  v: z.literal(PROTOCOL_VERSION),
  runId: z.string(),
  agentId: z.string(),
  usage: UsageSchema,
  turns: z.number().int().nonnegative(),
  /** Session-log events of the run, each with the agent id that recorded it. */
  events: z.array(SessionEventSchema),
};

/** Worker → supervisor: how a run ended (a crash is detected by the supervisor, never sent). */
export const SubagentResult = z.discriminatedUnion('status', [
  z.object({
    ...common,
    status: z.literal('done'),
    text: z.string(),
    /** Metadata operations the run applied, in order (for a merge-back through the reducer). */
    updates: z.array(OperationSchema),
  }),
  z.object({ ...common, status: z.literal('failed'), error: ErrorShape }),
  z.object({ ...common, status: z.literal('incomplete') }),
  z.object({
    ...common,
    status: z.literal('cancelled'),
    reason: z.enum(['user', 'parent', 'deadline', 'shutdown']),
  }),
  z.object({ ...common, status: z.literal('suspended'), request: Request, state: LoopStateSchema }),
]);
/** See the {@link SubagentResult} schema. */
export type SubagentResult = z.infer<typeof SubagentResult>;

/** The marker of the worker → supervisor message that opens a run's host channel. */
export const HOST_OPEN = 'troupe.host.open';

/** Worker → supervisor over the host channel: ask the approval handler about a call. */
export const HostApprovalRequest = z.object({
  toolName: z.string().min(1),
  toolCallId: z.string().min(1),
  arguments: z.unknown(),
});
/** See the {@link HostApprovalRequest} schema. */
export type HostApprovalRequest = z.infer<typeof HostApprovalRequest>;

/** Worker → supervisor: run a delegated task (a subagent's own `task` call). */
export const HostTaskRequest = z.object({
  /** The name of one of the calling agent's declared subagents. */
  subagent: z.string().min(1),
  instructions: z.string(),
  toolCallId: z.string().min(1),
  answer: Answer.optional(),
  /** The calling agent's metadata: the child's snapshot. */
  metadata: z.record(z.string(), z.unknown()),
});
/** See the {@link HostTaskRequest} schema. */
export type HostTaskRequest = z.infer<typeof HostTaskRequest>;

/** Supervisor → worker: how a delegated task ended. */
export const HostTaskResult = z.discriminatedUnion('status', [
  z.object({
    status: z.literal('done'),
    result: z.string(),
    updates: z.array(OperationSchema).optional(),
    events: z.array(SessionEventSchema),
  }),
  z.object({ status: z.literal('suspended'), request: Request }),
  z.object({ status: z.literal('error'), error: ErrorShape, events: z.array(SessionEventSchema) }),
]);
/** See the {@link HostTaskResult} schema. */
export type HostTaskResult = z.infer<typeof HostTaskResult>;

/** Worker → supervisor: a telemetry event to re-emit on the supervisor's emitter. */
export const HostTelemetry = z.object({ event: z.string().min(1), payload: z.record(z.string(), z.unknown()) });
/** See the {@link HostTelemetry} schema. */
export type HostTelemetry = z.infer<typeof HostTelemetry>;

/**
 * What the supervisor exposes to one run over its host channel (comlink).
 * Every argument is parsed on the supervisor side: a worker is not trusted to
 * decide anything (it cannot mark a call approved).
 */
export interface HostApi {
  approve(request: HostApprovalRequest): Promise<unknown>;
  runTask(request: HostTaskRequest): Promise<HostTaskResult>;
  telemetry(event: HostTelemetry): void;
}
