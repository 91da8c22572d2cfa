import {
  type Attributes,
  type Context,
  context,
  type Link,
  type Span,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import type { Scope, Usage } from '@troupe/core';
import type { Supervisor, SupervisorEvents } from '@troupe/supervisor';
import { GenAi, GenAiOperation, TroupeAttr, TroupeEvent } from '../Conventions.js';
import { ContentCapture, captureKey, truncate } from './ContentCapture.js';
import { epochToHrTime } from './epochToHrTime.js';

/** Options of the bridge, validated and defaulted by `instrument`. */
export interface BridgeOptions {
  readonly tracer: Tracer;
  readonly tenant: ((scope: Scope) => string) | undefined;
  /** Characters of content kept per value; undefined: content is off. */
  readonly maxContentLength: number | undefined;
  readonly onError: ((error: unknown) => void) | undefined;
}

type Payload<K extends keyof SupervisorEvents> = SupervisorEvents[K][0];

interface ToolState {
  readonly span: Span;
  attempts: number;
}

interface ModelState {
  readonly span: Span;
  readonly capture: ContentCapture | undefined;
}

/** One open `invoke_agent` span: a run between its (re)start and its end or suspension. */
interface RunState {
  readonly runId: string;
  readonly agentId: string;
  readonly span: Span;
  /** The span as the parent of what the run does (its tool and model calls, its children). */
  readonly context: Context;
  readonly startedAt: number;
  readonly tenant: string | undefined;
  readonly conversationId: string | undefined;
  readonly tools: Map<string, ToolState>;
  model: ModelState | undefined;
  /**
   * Arguments the run's last model call streamed for its tool calls, by
   * {@link captureKey} of their ids (content on only). Replaced by each
   * model call: the calls of one answer run before the next model call.
   */
  toolArgs: Map<string, string> | undefined;
}

/** Suspended spans remembered for the resumed run to link to (a person may take days: bounded). */
const SUSPENDED_MEMORY = 10_000;

const RUN_END_EVENTS = [
  'agent.done',
  'agent.failed',
  'agent.cancelled',
  'agent.incomplete',
  'agent.suspended',
  'subagent.done',
  'subagent.failed',
  'subagent.crashed',
  'subagent.cancelled',
  'subagent.incomplete',
  'subagent.suspended',
] as const;

/**
 * Turns a supervisor's events into spans, on the supervisor thread: one
 * `invoke_agent` span per run dispatch, `execute_tool` per tool call,
 * `chat` per model call, with the times the events carry (a worker's
 * events carry the time the worker measured). Every listener is guarded: a
 * failing tracer or exporter never reaches the supervisor's emit.
 */
export class Bridge {
  readonly #supervisor: Supervisor;
  readonly #o: BridgeOptions;
  readonly #runs = new Map<string, RunState>();
  readonly #byAgent = new Map<string, RunState>();
  readonly #suspended = new Map<string, SpanContext>();
  readonly #listeners: [keyof SupervisorEvents, (payload: never) => void][] = [];
  #spans = 0;
  #errors = 0;
  #stopped = false;

  constructor(supervisor: Supervisor, options: BridgeOptions) {
    this.#supervisor = supervisor;
    this.#o = options;
    this.#on('agent.run.started', (e) => this.#messageStarted(e));
    this.#on('subagent.spawned', (e) => this.#spawned(e));
    for (const name of RUN_END_EVENTS) this.#on(name, (e) => this.#runEnded(name, e));
    this.#on('tool.execute.start', (e) => this.#toolStart(e as Payload<'tool.execute.start'> & { runId?: string }));
    this.#on('tool.execute.exception', (e) =>
      this.#toolException(e as Payload<'tool.execute.exception'> & { runId?: string }),
    );
    this.#on('tool.execute.timeout', (e) =>
      this.#toolTimeout(e as Payload<'tool.execute.timeout'> & { runId?: string }),
    );
    this.#on('tool.execute.stop', (e) => this.#toolStop(e as Payload<'tool.execute.stop'> & { runId?: string }));
    this.#on('model.start', (e) => this.#modelStart(e as Payload<'model.start'> & { runId?: string }));
    this.#on('model.stop', (e) => this.#modelStop(e as Payload<'model.stop'> & { runId?: string }));
    this.#on('model.error', (e) => this.#modelError(e as Payload<'model.error'> & { runId?: string }));
    // Deltas cross the thread only when someone listens: only content capture does.
    if (options.maxContentLength !== undefined) this.#on('model.delta', (e) => this.#deltas(e));
  }

  /** Spans started, spans still open, listener errors (tracer or exporter failures caught). */
  stats(): { readonly spans: number; readonly open: number; readonly errors: number } {
    let open = this.#runs.size;
    for (const run of this.#runs.values()) open += run.tools.size + (run.model === undefined ? 0 : 1);
    return { spans: this.#spans, open, errors: this.#errors };
  }

  /** Remove every listener; spans still open end now, marked as cut short. Idempotent. */
  stop(): void {
    if (this.#stopped) return;
    this.#stopped = true;
    for (const [name, fn] of this.#listeners) this.#supervisor.off(name, fn as never);
    this.#listeners.length = 0;
    for (const run of [...this.#runs.values()]) {
      this.#guard(() => {
        this.#closeLeftovers(run, undefined, 'the bridge stopped');
        run.span.setAttribute(TroupeAttr.runStatus, 'unfinished');
        run.span.end();
      });
    }
    this.#runs.clear();
    this.#byAgent.clear();
    this.#suspended.clear();
  }

  #on<K extends keyof SupervisorEvents>(name: K, fn: (payload: Payload<K>) => void): void {
    const listener = (payload: Payload<K>): void => {
      try {
        fn(payload);
      } catch (error) {
        this.#failed(error);
      }
    };
    this.#supervisor.on(name, listener as never);
    this.#listeners.push([name, listener as (payload: never) => void]);
  }

  #guard(fn: () => void): void {
    try {
      fn();
    } catch (error) {
      this.#failed(error);
    }
  }

  #failed(error: unknown): void {
    this.#errors++;
    try {
      this.#o.onError?.(error);
    } catch {
      // The integrator's error hook failing must not reach the supervisor either.
    }
  }

  #startSpan(name: string, kind: SpanKind, at: number, attributes: Attributes, parent: Context, links?: Link[]): Span {
    this.#spans++;
    return this.#o.tracer.startSpan(
      name,
      links === undefined
        ? { kind, startTime: epochToHrTime(at), attributes }
        : { kind, startTime: epochToHrTime(at), attributes, links },
      parent,
    );
  }

  // ── Runs ────────────────────────────────────────────────────────────────

  // A parent agent's message: on the async context of the host's send (or answer): its active span parents the tree.
  #messageStarted(e: Payload<'agent.run.started'>): void {
    const handle = this.#supervisor.agent(e.agentId);
    this.#openRun({
      runId: e.runId,
      agentId: e.agentId,
      agent: e.agent,
      kind: 'message',
      resumed: e.resumed,
      at: e.at,
      model: e.model,
      provider: e.provider,
      parentAgentId: undefined,
      parent: context.active(),
      inherited: undefined,
      conversationId: handle?.conversationId,
      extra: { [GenAi.threadId]: 0 },
    });
  }

  #spawned(e: Payload<'subagent.spawned'>): void {
    const parentRun = e.parentAgentId === undefined ? undefined : this.#byAgent.get(e.parentAgentId);
    const task = e.toolCallId === undefined ? undefined : parentRun?.tools.get(e.toolCallId);
    // A child is parented under the `task` call that spawned it; a direct spawn, or a resumed child
    // whose parent is suspended (no span open), under the context of the host call that caused it.
    const parent =
      task !== undefined && parentRun !== undefined
        ? trace.setSpan(parentRun.context, task.span)
        : (parentRun?.context ?? context.active());
    const root = e.path[0];
    this.#openRun({
      runId: e.runId,
      agentId: e.agentId,
      agent: e.agent,
      kind: e.parentAgentId === undefined ? 'spawn' : 'subagent',
      resumed: e.resumed,
      at: e.at,
      model: e.model,
      provider: e.provider,
      parentAgentId: e.parentAgentId,
      parent,
      inherited: parentRun,
      conversationId:
        parentRun?.conversationId ??
        (root === undefined || e.parentAgentId === undefined
          ? undefined
          : this.#supervisor.agent(root)?.conversationId),
      extra: {
        [TroupeAttr.scopeBytes]: e.bytes.scope,
        [TroupeAttr.toolContextBytes]: e.bytes.toolContext,
        [TroupeAttr.metadataBytes]: e.bytes.metadata,
        [TroupeAttr.channelBytes]: e.bytes.total,
      },
    });
  }

  #openRun(r: {
    readonly runId: string;
    readonly agentId: string;
    readonly agent: string;
    readonly kind: 'message' | 'subagent' | 'spawn';
    readonly resumed: boolean;
    readonly at: number;
    readonly model: string | undefined;
    readonly provider: string | undefined;
    readonly parentAgentId: string | undefined;
    readonly parent: Context;
    readonly inherited: RunState | undefined;
    readonly conversationId: string | undefined;
    readonly extra: Attributes;
  }): void {
    if (this.#runs.has(r.runId)) return;
    const tenant = r.inherited !== undefined ? r.inherited.tenant : this.#tenantOf(r.agentId);
    // What a sampler decides on is set at the span's start.
    const attributes: Attributes = {
      [GenAi.operationName]: GenAiOperation.invokeAgent,
      [GenAi.agentName]: r.agent,
      [GenAi.agentId]: r.agentId,
      [TroupeAttr.runId]: r.runId,
      [TroupeAttr.runKind]: r.kind,
      [TroupeAttr.runResumed]: r.resumed,
      ...r.extra,
    };
    if (r.provider !== undefined) attributes[GenAi.providerName] = r.provider;
    if (r.model !== undefined) attributes[GenAi.requestModel] = r.model;
    if (r.conversationId !== undefined) attributes[GenAi.conversationId] = r.conversationId;
    if (r.parentAgentId !== undefined) attributes[TroupeAttr.parentAgentId] = r.parentAgentId;
    if (tenant !== undefined) attributes[TroupeAttr.tenant] = tenant;
    const suspended = r.resumed ? this.#suspended.get(r.runId) : undefined;
    if (suspended !== undefined) this.#suspended.delete(r.runId);
    const span = this.#startSpan(
      `${GenAiOperation.invokeAgent} ${r.agent}`,
      SpanKind.INTERNAL,
      r.at,
      attributes,
      r.parent,
      suspended === undefined ? undefined : [{ context: suspended, attributes: { [TroupeAttr.runResumed]: true } }],
    );
    const run: RunState = {
      runId: r.runId,
      agentId: r.agentId,
      span,
      context: trace.setSpan(r.parent, span),
      startedAt: r.at,
      tenant,
      conversationId: r.conversationId,
      tools: new Map(),
      model: undefined,
      toolArgs: undefined,
    };
    this.#runs.set(r.runId, run);
    this.#byAgent.set(r.agentId, run);
  }

  // Only the integrator's hook sees the scope; only what it returns is recorded.
  #tenantOf(agentId: string): string | undefined {
    const hook = this.#o.tenant;
    if (hook === undefined) return undefined;
    const scope = this.#supervisor.scopeOf(agentId);
    if (scope === undefined) return undefined;
    let tenant: unknown;
    try {
      tenant = hook(scope);
    } catch (error) {
      this.#failed(error);
      return undefined;
    }
    return typeof tenant === 'string' ? tenant : undefined;
  }

  #runEnded(name: (typeof RUN_END_EVENTS)[number], e: Payload<(typeof RUN_END_EVENTS)[number]>): void {
    const runId = (e as { runId?: string }).runId;
    if (runId === undefined) return; // an agent.failed of a persistence defect: no run
    const run = this.#runs.get(runId);
    if (run === undefined) return;
    this.#runs.delete(runId);
    if (this.#byAgent.get(run.agentId) === run) this.#byAgent.delete(run.agentId);
    const span = run.span;
    const status = name.slice(name.indexOf('.') + 1);
    span.setAttribute(TroupeAttr.runStatus, status);
    const usage = (e as { usage?: Usage }).usage;
    if (usage !== undefined) setUsage(span, usage);
    const total = (e as { totalUsage?: Usage }).totalUsage;
    if (total !== undefined) {
      span.setAttribute(TroupeAttr.totalInputTokens, total.inputTokens);
      span.setAttribute(TroupeAttr.totalOutputTokens, total.outputTokens);
    }
    const turns = (e as { turns?: number }).turns;
    if (turns !== undefined) span.setAttribute(TroupeAttr.runTurns, turns);
    const placement = e as { threadId?: number; dispatchedAt?: number };
    if (placement.threadId !== undefined) {
      span.setAttribute(GenAi.threadId, placement.threadId);
      if (placement.dispatchedAt !== undefined && placement.dispatchedAt >= run.startedAt) {
        span.setAttribute(TroupeAttr.queueWaitMs, placement.dispatchedAt - run.startedAt);
      }
    }
    let interrupted: string | undefined;
    switch (status) {
      case 'done':
        break;
      case 'suspended': {
        // Not an error: the run waits on a person; the resumed run links here.
        span.setAttribute(TroupeAttr.requestId, (e as { requestId: string }).requestId);
        this.#suspended.set(runId, span.spanContext());
        if (this.#suspended.size > SUSPENDED_MEMORY) {
          const oldest = this.#suspended.keys().next().value;
          if (oldest !== undefined) this.#suspended.delete(oldest);
        }
        interrupted = 'the run suspended';
        break;
      }
      case 'cancelled': {
        const c = e as { reason: string; forced?: boolean };
        span.setAttribute(TroupeAttr.cancelReason, c.reason);
        if (c.forced !== undefined) span.setAttribute(TroupeAttr.cancelForced, c.forced);
        span.setAttribute(GenAi.errorType, 'cancelled');
        interrupted = `cancelled (${c.reason})`;
        span.setStatus({
          code: SpanStatusCode.ERROR,
          message: `cancelled (${c.reason}${c.forced === true ? ', forced' : ''})`,
        });
        break;
      }
      case 'crashed': {
        const c = e as { exitCode: number | null; error: Error };
        if (c.exitCode !== null) span.setAttribute(TroupeAttr.exitCode, c.exitCode);
        span.setAttribute(GenAi.errorType, errorType(c.error));
        interrupted = 'its worker crashed';
        span.setStatus({
          code: SpanStatusCode.ERROR,
          message: `crashed: its worker ${c.exitCode === null ? 'died' : `exited with code ${c.exitCode}`}`,
        });
        break;
      }
      case 'failed': {
        const type = errorType((e as { error: unknown }).error);
        span.setAttribute(GenAi.errorType, type);
        interrupted = 'the run failed';
        span.setStatus({ code: SpanStatusCode.ERROR, message: `failed: ${type}` });
        break;
      }
      case 'incomplete':
        span.setAttribute(GenAi.errorType, 'incomplete');
        span.setStatus({ code: SpanStatusCode.ERROR, message: 'incomplete: reached its turn limit without an answer' });
        break;
    }
    this.#closeLeftovers(run, e.at, interrupted ?? 'the run ended');
    span.end(epochToHrTime(e.at));
  }

  // Calls whose end never arrived (a killed worker cannot report it): they end with their run.
  #closeLeftovers(run: RunState, at: number | undefined, why: string): void {
    const end = at === undefined ? undefined : epochToHrTime(at);
    for (const tool of run.tools.values()) {
      tool.span.setAttribute(TroupeAttr.toolStatus, 'cancelled');
      tool.span.setStatus({ code: SpanStatusCode.ERROR, message: `interrupted: ${why}` });
      tool.span.end(end);
    }
    run.tools.clear();
    if (run.model !== undefined) {
      run.model.span.setStatus({ code: SpanStatusCode.ERROR, message: `interrupted: ${why}` });
      run.model.span.end(end);
      run.model = undefined;
    }
  }

  // ── Tool calls ──────────────────────────────────────────────────────────

  #toolStart(e: Payload<'tool.execute.start'> & { runId?: string }): void {
    const run = e.runId === undefined ? undefined : this.#runs.get(e.runId);
    if (run === undefined) return;
    const known = run.tools.get(e.toolCallId);
    if (known !== undefined) {
      // A retry: the call's span goes on.
      known.attempts = e.attempt;
      known.span.addEvent(TroupeEvent.toolAttempt, { [TroupeAttr.toolAttempts]: e.attempt }, epochToHrTime(e.at));
      return;
    }
    run.tools.set(e.toolCallId, { span: this.#toolSpan(run, e.toolName, e.toolCallId, e.at), attempts: e.attempt });
  }

  #toolSpan(run: RunState, toolName: string, toolCallId: string, at: number): Span {
    const attributes: Attributes = {
      [GenAi.operationName]: GenAiOperation.executeTool,
      [GenAi.toolName]: toolName,
      [GenAi.toolCallId]: toolCallId,
      [GenAi.toolType]: 'function',
    };
    const max = this.#o.maxContentLength;
    if (run.toolArgs !== undefined && max !== undefined) {
      const key = captureKey(toolCallId, max);
      const args = run.toolArgs.get(key);
      if (args !== undefined) {
        attributes[GenAi.toolCallArguments] = args;
        run.toolArgs.delete(key);
      }
    }
    return this.#startSpan(`${GenAiOperation.executeTool} ${toolName}`, SpanKind.INTERNAL, at, attributes, run.context);
  }

  #toolException(e: Payload<'tool.execute.exception'> & { runId?: string }): void {
    const tool = this.#tool(e.runId, e.toolCallId);
    if (tool === undefined) return;
    // The raw reason and stack may hold secrets: the error's code or name only.
    tool.span.addEvent(
      TroupeEvent.toolAttemptFailed,
      {
        [TroupeAttr.toolAttempts]: e.attempt,
        [TroupeAttr.toolFailure]: e.kind,
        [TroupeAttr.toolWillRetry]: e.willRetry,
        [GenAi.errorType]: errorType(e.reason),
      },
      epochToHrTime(e.at),
    );
  }

  #toolTimeout(e: Payload<'tool.execute.timeout'> & { runId?: string }): void {
    const tool = this.#tool(e.runId, e.toolCallId);
    if (tool === undefined) return;
    tool.span.setAttribute(TroupeAttr.toolTimeoutMs, e.timeoutMs);
    tool.span.addEvent(TroupeEvent.toolTimeout, { [TroupeAttr.toolTimeoutMs]: e.timeoutMs }, epochToHrTime(e.at));
  }

  #tool(runId: string | undefined, toolCallId: string): ToolState | undefined {
    return runId === undefined ? undefined : this.#runs.get(runId)?.tools.get(toolCallId);
  }

  #toolStop(e: Payload<'tool.execute.stop'> & { runId?: string }): void {
    const run = e.runId === undefined ? undefined : this.#runs.get(e.runId);
    if (run === undefined) return;
    let tool = run.tools.get(e.toolCallId);
    if (tool === undefined) {
      // No attempt ran (denied, invalid, asked, cancelled first): the span covers the decision.
      tool = { span: this.#toolSpan(run, e.toolName, e.toolCallId, e.at - e.durationMs), attempts: 0 };
    } else run.tools.delete(e.toolCallId);
    const span = tool.span;
    const outcome =
      e.status === 'ok'
        ? 'ok'
        : e.status === 'pending'
          ? 'suspended'
          : e.failure === 'timeout'
            ? 'timeout'
            : e.failure === 'cancelled'
              ? 'cancelled'
              : 'error';
    span.setAttribute(TroupeAttr.toolStatus, outcome);
    span.setAttribute(TroupeAttr.toolAttempts, e.attempt);
    if (e.approval !== undefined) span.setAttribute(TroupeAttr.toolApproval, e.approval);
    if (e.failure !== undefined) span.setAttribute(TroupeAttr.toolFailure, e.failure);
    if (outcome === 'timeout' || outcome === 'cancelled' || outcome === 'error') {
      const type = outcome === 'error' ? (e.failure ?? 'error') : outcome;
      span.setAttribute(GenAi.errorType, type);
      span.setStatus({ code: SpanStatusCode.ERROR, message: `${outcome}: ${e.failure ?? 'error'}` });
    }
    span.end(epochToHrTime(e.at));
  }

  // ── Model calls ─────────────────────────────────────────────────────────

  #modelStart(e: Payload<'model.start'> & { runId?: string }): void {
    const run = e.runId === undefined ? undefined : this.#runs.get(e.runId);
    if (run === undefined) return;
    const attributes: Attributes = {
      [GenAi.operationName]: GenAiOperation.chat,
      [TroupeAttr.modelTurn]: e.turn,
    };
    if (e.provider !== undefined) attributes[GenAi.providerName] = e.provider;
    if (e.model !== undefined) attributes[GenAi.requestModel] = e.model;
    if (run.conversationId !== undefined) attributes[GenAi.conversationId] = run.conversationId;
    run.model?.span.end(epochToHrTime(e.at)); // a start without a stop: never expected, never leaked
    const max = this.#o.maxContentLength;
    run.model = {
      span: this.#startSpan(
        e.model === undefined ? GenAiOperation.chat : `${GenAiOperation.chat} ${e.model}`,
        SpanKind.CLIENT,
        e.at,
        attributes,
        run.context,
      ),
      capture: max === undefined ? undefined : new ContentCapture(max),
    };
  }

  #deltas(e: Payload<'model.delta'>): void {
    this.#runs.get(e.runId)?.model?.capture?.add(e.deltas);
  }

  #modelStop(e: Payload<'model.stop'> & { runId?: string }): void {
    const run = e.runId === undefined ? undefined : this.#runs.get(e.runId);
    const model = run?.model;
    if (run === undefined || model === undefined) return;
    run.model = undefined;
    const span = model.span;
    if (e.usage !== undefined) setUsage(span, e.usage);
    if (e.responseModel !== undefined) span.setAttribute(GenAi.responseModel, e.responseModel);
    if (e.finishReason !== undefined) span.setAttribute(GenAi.responseFinishReasons, [e.finishReason]);
    if (e.timeToFirstTokenMs !== undefined) {
      span.setAttribute(GenAi.responseTimeToFirstChunk, e.timeToFirstTokenMs / 1000);
    }
    if (e.attempts !== undefined) span.setAttribute(TroupeAttr.modelAttempts, e.attempts);
    span.setAttribute(TroupeAttr.modelToolCalls, e.toolCalls);
    if (model.capture !== undefined) {
      const output = model.capture.outputMessages(e.finishReason);
      if (output !== undefined) span.setAttribute(GenAi.outputMessages, output);
      // Replaced, not merged: calls a model streamed but the loop never ran (refused, cut short)
      // do not pile up over a long run.
      const args = model.capture.toolArguments();
      run.toolArgs = args.size === 0 ? undefined : args;
    }
    span.end(epochToHrTime(e.at));
  }

  #modelError(e: Payload<'model.error'> & { runId?: string }): void {
    const run = e.runId === undefined ? undefined : this.#runs.get(e.runId);
    const model = run?.model;
    if (run === undefined || model === undefined) return;
    run.model = undefined;
    const span = model.span;
    if (e.attempts !== undefined) span.setAttribute(TroupeAttr.modelAttempts, e.attempts);
    const type = e.cancelled ? 'cancelled' : errorType(e.error);
    span.setAttribute(GenAi.errorType, type);
    span.setStatus({ code: SpanStatusCode.ERROR, message: e.cancelled ? 'cancelled' : `failed: ${type}` });
    span.end(epochToHrTime(e.at));
  }
}

function setUsage(span: Span, usage: Usage): void {
  span.setAttribute(GenAi.usageInputTokens, usage.inputTokens);
  span.setAttribute(GenAi.usageOutputTokens, usage.outputTokens);
  if (usage.cachedInputTokens !== undefined)
    span.setAttribute(GenAi.usageCacheReadInputTokens, usage.cachedInputTokens);
  if (usage.reasoningTokens !== undefined) span.setAttribute(GenAi.usageReasoningOutputTokens, usage.reasoningTokens);
}

/** A low-cardinality name for an error: its stable code, else its class name; never its message. */
function errorType(error: unknown): string {
  const e = error as { code?: unknown; name?: unknown } | null | undefined;
  if (typeof e?.code === 'string' && e.code.length > 0) return truncate(e.code, 64);
  if (typeof e?.name === 'string' && e.name.length > 0) return truncate(e.name, 64);
  return '_OTHER';
}
