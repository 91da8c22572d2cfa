import {
  type Agent,
  type AgentId,
  type Answer,
  type Clock,
  InvalidArgumentError,
  isTroupeError,
  type LoopState,
  type Request,
  type Scope,
  TroupeError,
  type Usage,
} from '@troupe/core';
import type { AgentHandle } from '../AgentHandle.js';
import { restoredDefinition } from '../internal/AgentDefinitions.js';
import type { AgentRegistry } from '../internal/AgentRegistry.js';
import type { ParentAgent } from '../internal/ParentAgent.js';
import type { RootOwner, RunNode } from '../internal/RunNode.js';
import type { RestoredRequest, RestoredRun, RunTree } from '../RunTree.js';
import type { AnswerOptions } from '../SupervisorOptions.js';
import type { PersistenceAdapter, PersistenceContext, RequestRecord, RunRecord } from './Persistence.js';
import type { AgentStateEnvelope } from './StateEnvelope.js';

/** What restoring needs of the supervisor it works for. */
export interface RestorerDeps {
  readonly store: PersistenceAdapter;
  readonly clock: Clock;
  readonly tree: RunTree;
  readonly agents: AgentRegistry;
  readonly agentsByName: ReadonlyMap<string, Agent>;
  sealScope(input: unknown): Scope;
  startAgent(
    agent: Agent,
    options: {
      readonly agentId: string;
      readonly conversationId: string;
      readonly scope: Scope;
      readonly toolContext?: Readonly<Record<string, unknown>>;
    },
  ): Promise<AgentHandle>;
  stopAgent(agentId: string): Promise<void>;
}

/**
 * Conversations that come back from the store, across processes: a saved
 * conversation restored as it was left (suspended at any depth, or
 * interrupted mid-turn), the runs a dead process left running marked
 * interrupted (once per supervisor), and an answer routed to a request this
 * process does not hold — restoring its conversation with the answerer's
 * scope, or refusing it while another live process runs that conversation.
 * The store's own record decides; this supervisor's copy never writes over
 * another process's.
 */
export class Restorer {
  readonly #d: RestorerDeps;
  readonly #store: PersistenceAdapter;
  /** Conversations being restored for an answer, by agent id: a second answer waits for the first restore. */
  readonly #restoring = new Map<string, Promise<void>>();
  /** The store's runs left running by a dead process, marked interrupted (once, before the first restore). */
  #recovered: Promise<void> | undefined;

  constructor(deps: RestorerDeps) {
    this.#d = deps;
    this.#store = deps.store;
  }

  /** Once per supervisor, before anything is restored: runs a dead process left running read interrupted. */
  recover(): Promise<void> {
    this.#recovered ??= this.#store.markInterrupted().then(
      () => {},
      (error: unknown) => {
        this.#recovered = undefined;
        throw error;
      },
    );
    return this.#recovered;
  }

  /**
   * A saved conversation comes back: suspended (its runs at every depth, its
   * questions open under their ids, answers taken before a crash delivered),
   * or interrupted (a message that was mid-turn, resumed by `resume()`) — also
   * one whose envelope is still suspended while its row says a resumed run was
   * interrupted: the answer was taken and the process died inside the re-run.
   * Questions of runs that did not survive are withdrawn.
   */
  async conversation(
    parent: ParentAgent,
    def: Agent,
    saved: AgentStateEnvelope,
    ctx: PersistenceContext,
    /** The caller's own refusal (a toolContext without its keys), once a busy conversation was refused first. */
    check: () => void = () => {},
  ): Promise<void> {
    const store = this.#store;
    const scope = parent.scope;
    // Its live runs, and those a crash interrupted (what their subagents had spent is counted below).
    let live = await store.loadRuns(scope, ctx, { interrupted: true });
    if (saved.runId !== undefined && store.durable === true && runningIn(live, saved.runId) !== undefined) {
      live = await this.#refuseIfRunningElsewhere(store, scope, ctx, saved.runId);
    }
    check();
    const rootRow =
      saved.runId === undefined
        ? undefined
        : (live.find((r) => r.runId === saved.runId) ?? (await store.getRun(scope, saved.runId)));
    const kept = new Set<string>();
    /** The runs that come back here: the root, and its suspended descendants when it is suspended. */
    const restored = new Set<string>();
    // Runs a process claimed for an answer and died before they ran anything: still suspended.
    const claimed = await this.#onlyClaimed(scope, live);
    const waiting = (r: RunRecord) => r.status === 'suspended' || claimed.has(r.runId);
    // Suspended when its root's row says so (the envelope may be a write behind it), or, with no row, its envelope.
    if ((rootRow !== undefined && waiting(rootRow)) || (rootRow === undefined && saved.status === 'suspended')) {
      const rootState = (rootRow?.state as LoopState | undefined) ?? saved.state;
      // The suspended runs under the root, parents before children.
      const rows = new Map<string, RunRecord>();
      for (const r of live) if (waiting(r) && r.runId !== saved.runId) rows.set(r.runId, r);
      const descendants: RestoredRun[] = [];
      const agents = new Map<string, Agent>([[saved.runId ?? '', def]]);
      const states = new Map<string, LoopState>([[saved.runId ?? '', rootState]]);
      for (let grew = true; grew; ) {
        grew = false;
        for (const [runId, r] of rows) {
          const parentAgent = r.parentRunId === undefined ? undefined : agents.get(r.parentRunId);
          if (parentAgent === undefined || r.toolCallId === undefined || r.state === undefined) continue;
          rows.delete(runId);
          grew = true;
          const agent = await restoredDefinition(parentAgent, r.agentName);
          if (agent === undefined) {
            // Its question would be withdrawn unasked and its parent told it was interrupted: refused
            // instead, before anything is changed, so a build that declares it again can restore it.
            throw new InvalidArgumentError(
              `conversation ${ctx.conversationId} is suspended in run ${runId} of subagent "${r.agentName}", which agent "${parentAgent.name}" no longer declares in its subagents: start it with a build that declares "${r.agentName}" (nothing was changed; its requests stay open), or deleteConversation to drop it`,
              { code: 'ERR_UNKNOWN_AGENT' },
            );
          }
          agents.set(runId, agent);
          states.set(runId, r.state as LoopState);
          descendants.push({
            runId,
            parentRunId: r.parentRunId as string,
            agentId: r.agentId,
            toolCallId: r.toolCallId,
            agent,
            state: r.state as LoopState,
            usage: r.usage,
            attempt: r.attempt,
          });
        }
      }
      // Every open question of every restored run, as the store has it now.
      const requests: RestoredRequest[] = [];
      const answered: { id: string; answer: Answer }[] = [];
      // An envelope of version 1 names the root's questions by the host's ids only in its list.
      const listed = new Map((saved.openRequests ?? []).map((r) => [r.toolCallId, r]));
      /** The runs an answer taken in the store resumes (claimed below, before anything is delivered). */
      const resumes = new Set<string>();
      for (const [runId, state] of states) {
        for (const p of state.pending ?? []) {
          if (p.result !== undefined || p.delegated === true || p.request === undefined) continue;
          const old = runId === (saved.runId ?? '') ? listed.get(p.call.id) : undefined;
          const id = old?.id ?? p.request.id;
          const record = await store.getRequest(scope, id);
          const local: Request =
            record !== undefined ? { ...record.request, id: record.localId } : (old?.local ?? p.request);
          requests.push({
            id,
            toolCallId: p.call.id,
            local,
            // Whether it asks for an approval is what the supervisor saved, never what a run's state says.
            approval: record?.approval ?? old?.approval ?? false,
            // And the call it approves, as saved then (none: a yes asks the handler again).
            call: record?.approvedCall,
            runId: runId === '' ? undefined : runId,
          });
          kept.add(id);
          if (record?.status === 'answered' && record.answer !== undefined) {
            answered.push({ id, answer: record.answer });
            resumes.add(runId);
          } else if (record?.status === 'withdrawn') {
            answered.push({ id, answer: { id, ok: false, reason: 'the request was withdrawn before a restart' } });
            resumes.add(runId);
          }
        }
      }
      await this.#claim(scope, ctx, resumes, rootRow, descendants, live);
      if (saved.runId !== undefined) restored.add(saved.runId);
      for (const r of descendants) restored.add(r.runId);
      parent.reserveChildren(saved.childCounter + tasksOfMessage(rootState));
      parent.restoreSuspended(
        { runId: saved.runId, attempt: rootRow?.attempt ?? 0, state: rootState },
        requests,
        descendants,
      );
      // Answers a dead process took before its run resumed: delivered now (the tool re-runs once).
      parent.redeliver(answered);
    } else if (
      rootRow !== undefined &&
      !isEndedRow(rootRow) &&
      // Mid-turn when its envelope says so, or when its row does: a message resumed by an answer
      // writes its run's row (running, a new attempt) and no envelope until it settles.
      (saved.status === 'running' || rootRow.status === 'interrupted')
    ) {
      const calls = await store.loadToolCalls(scope, rootRow.runId);
      const state = (rootRow.state as LoopState | undefined) ?? saved.state;
      // What its subagents cut off by the crash had spent (their rows' subtree totals), by task call.
      const lost = new Map<string, Usage>();
      for (const r of live) {
        if (r.parentRunId === rootRow.runId && r.toolCallId !== undefined && r.status === 'interrupted')
          lost.set(r.toolCallId, r.totalUsage);
      }
      restored.add(rootRow.runId);
      // Children it may have spawned before the crash keep their ids: new ones are numbered past them.
      parent.reserveChildren(saved.childCounter + tasksOfMessage(state));
      parent.restoreInterrupted({
        runId: rootRow.runId,
        attempt: rootRow.attempt,
        state,
        started: calls
          .filter((c) => c.status === 'started')
          .map((c) => ({ toolCallId: c.toolCallId, attempt: c.attempt })),
        lost,
      });
    }
    await this.#endLeftBehind(scope, ctx, live, restored);
    // Questions of runs that did not come back (interrupted under a crash) can never be answered.
    for (let after: string | undefined, more = true; more; ) {
      const page = await store.listRequests(scope, { conversationId: ctx.conversationId, after, limit: 1000 });
      for (const r of page.items) {
        if (!kept.has(r.requestId)) await store.withdrawRequest(scope, r.requestId, this.#d.clock.now());
      }
      after = page.next;
      more = after !== undefined;
    }
  }

  /**
   * Claim the runs an answer the store holds taken resumes (`resumes`, by run id; `''` is a root
   * saved without one), before anything of the restore is written or delivered: each row, running
   * at its next attempt, in one transaction. The process that took the answer may be alive and
   * about to resume it: it claims the same rows, and the store lets one of the two write them. Here
   * fenced: that process carries the answer forward — refused `ERR_CONVERSATION_BUSY`, nothing
   * changed. There fenced: it runs nothing and its `answer()` says so; this one carries it.
   */
  async #claim(
    scope: Scope,
    ctx: PersistenceContext,
    resumes: ReadonlySet<string>,
    rootRow: RunRecord | undefined,
    descendants: readonly RestoredRun[],
    live: readonly RunRecord[],
  ): Promise<void> {
    const runs: RunRecord[] = [];
    const now = this.#d.clock.now();
    for (const runId of resumes) {
      const row = runId === rootRow?.runId ? rootRow : live.find((r) => r.runId === runId);
      if (row === undefined || (row !== rootRow && !descendants.some((d) => d.runId === runId))) continue;
      runs.push({ ...row, status: 'running', attempt: row.attempt + 1, updatedAt: now });
    }
    if (runs.length === 0) return;
    try {
      await this.#store.commit(scope, { runs }, ctx);
    } catch (error) {
      if (!isTroupeError(error, 'ERR_STORE_FENCED')) throw error;
      throw new TroupeError(
        `conversation ${ctx.conversationId} is carried forward by another process: it took the answer to a question of run ${runs.map((r) => r.runId).join(', ')} and resumed it first (nothing was changed here): retry once that message has ended, or send to (or answer through) the supervisor that runs it`,
        { code: 'ERR_CONVERSATION_BUSY', cause: error },
      );
    }
  }

  /**
   * The interrupted rows among `rows` that a process only claimed (see `Durability.claim`) and
   * died before it ran anything of them: their state waits on a question, and no tool call of
   * theirs started at their attempt. They are still suspended: the answer taken is delivered
   * again. (A run that died inside the re-run of its answered call had started it: interrupted.)
   */
  async #onlyClaimed(scope: Scope, rows: readonly RunRecord[]): Promise<ReadonlySet<string>> {
    const claimed = new Set<string>();
    for (const r of rows) {
      if (r.status !== 'interrupted') continue;
      const state = r.state as LoopState | undefined;
      const asks = state?.pending?.some(
        (p) => p.result === undefined && p.delegated !== true && p.request !== undefined,
      );
      if (asks !== true) continue;
      const calls = await this.#store.loadToolCalls(scope, r.runId);
      if (calls.every((c) => c.attempt !== r.attempt)) claimed.add(r.runId);
    }
    return claimed;
  }

  /**
   * The conversation's suspended runs that did not come back here: nothing can resume them any
   * more, so their rows end, `interrupted` (every run of a message ends in one terminal status in
   * the store too). A run that waits on its child is saved suspended: under a message a crash
   * interrupted (restored to be resumed from its own state: the task call's child is reported
   * interrupted to it), or under a parent that did not come back, it stayed suspended for good.
   * `running` rows left are a live process's own: untouched. A row written since by a newer
   * attempt (another process resumed it) fences this write: that one is left as it is.
   */
  async #endLeftBehind(
    scope: Scope,
    ctx: PersistenceContext,
    live: readonly RunRecord[],
    restored: ReadonlySet<string>,
  ): Promise<void> {
    for (const r of live) {
      if (r.status !== 'suspended' || restored.has(r.runId)) continue;
      const { state: _state, ...row } = r;
      try {
        // One at a time: a row fenced by another process's write does not hold back the others.
        await this.#store.commit(
          scope,
          { runs: [{ ...row, status: 'interrupted', updatedAt: this.#d.clock.now() }] },
          ctx,
        );
      } catch (error) {
        if (!isTroupeError(error, 'ERR_STORE_FENCED')) throw error;
      }
    }
  }

  /**
   * The store holds a running run of the conversation's message `rootRunId`: a message running in
   * another live process (or another supervisor of this one), in one that died after this
   * supervisor recovered at its start, or one whose end could not be saved (the write failed, and
   * this process went on). The store tells which now: a dead process's runs, and those whose
   * writer failed to save their end, become interrupted (returned with the others, to be restored
   * or resumed here); a live writer's are its own — refused, changing nothing. Runs of older
   * messages (a row its process could not save as ended) are not this message's.
   */
  async #refuseIfRunningElsewhere(
    store: PersistenceAdapter,
    scope: Scope,
    ctx: PersistenceContext,
    rootRunId: string,
  ): Promise<readonly RunRecord[]> {
    await store.markInterrupted({ scope });
    const live = await store.loadRuns(scope, ctx, { interrupted: true });
    const running = runningIn(live, rootRunId);
    if (running !== undefined) {
      throw new TroupeError(
        `conversation ${ctx.conversationId} is running a message in another live process, or in another supervisor of this process (run ${running.runId} of agent ${running.agentId}): nothing was changed; retry once that message has ended, or send to (or answer through) the supervisor that runs it`,
        { code: 'ERR_CONVERSATION_BUSY' },
      );
    }
    return live;
  }

  /**
   * A request open in a tree held here and quiet here, with a durable store: another live process
   * may be running the same conversation's message (this copy is then behind it; answering it here
   * would run the answered tool beside that process and save over it). Refused before the answer
   * is taken. A tree that runs here is this process's own: answered as usual.
   */
  async answerHeldHere(root: RunNode, requestId: string): Promise<void> {
    const store = this.#store;
    const conversation = root.conversation;
    if (store?.durable !== true || conversation === undefined) return;
    const ctx: PersistenceContext = {
      agentId: conversation.agentId as AgentId,
      conversationId: conversation.conversationId,
    };
    const live = await store.loadRuns(root.scope, ctx);
    if (runningIn(live, root.id) !== undefined) await this.#refuseIfRunningElsewhere(store, root.scope, ctx, root.id);
    // Quiet there too, but saved past this copy (another process answered one of its questions and
    // went on): answered here, the stale copy would run and be fenced at its save, the answer spent.
    const held = conversation.revision;
    // A request no longer open there is the store's compare-and-set to refuse, as it says.
    if (held === undefined || (await store.getRequest(root.scope, requestId))?.status !== 'open') return;
    const saved = (await store.loadState(root.scope, ctx))?.revision;
    if (saved !== undefined && saved !== held) {
      // Let go of the stale copy (it writes nothing): an answer with { scope } restores what is saved.
      (root.owner as RootOwner | undefined)?.takenElsewhere?.(root, requestId);
      throw new TroupeError(
        `conversation ${ctx.conversationId} was saved by another process after this copy was (revision ${saved}, this copy ${held}): nothing was answered and request ${requestId} stays open; answer again with { scope } to answer it on what is saved`,
        { code: 'ERR_STORE_FENCED' },
      );
    }
  }

  // A request the store has open, of a conversation not started here: start (restore) it with the caller's scope.
  async forAnswer(requestId: string, options: AnswerOptions, open: boolean): Promise<void> {
    const store = this.#store;
    const scope = this.#d.sealScope(options.scope);
    await this.recover();
    const record = await store.getRequest(scope, requestId);
    if (record === undefined) {
      // Not this tenant's (or never saved): the same answer as for an id nobody knows.
      throw new InvalidArgumentError(`no pending request ${requestId} for this scope: see listRequests(scope)`, {
        code: 'ERR_UNKNOWN_REQUEST',
      });
    }
    // Open in this tree (still, after the awaits above): answered where it is held.
    if (record.status === 'open' && this.#d.tree.requests.hasOpenRequest(requestId)) return;
    // Open here, closed in the store: another process took it, and what this supervisor holds is stale.
    if (open && (record.status === 'answered' || record.status === 'withdrawn')) {
      this.#d.tree.requests.takenElsewhere(requestId, record.status);
    }
    if (record.status === 'answered') {
      throw new InvalidArgumentError(`request ${requestId} was already answered: an answer is taken once`, {
        code: 'ERR_REQUEST_ALREADY_ANSWERED',
      });
    }
    if (record.status === 'withdrawn') {
      throw new InvalidArgumentError(
        `request ${requestId} was withdrawn (its run was cancelled or ended): nothing waits for an answer`,
        {
          code: 'ERR_UNKNOWN_REQUEST',
        },
      );
    }
    // One restore of a conversation at a time: an answer racing another one's restore waits for it
    // and looks again (then it finds the question here, or answered: ERR_REQUEST_ALREADY_ANSWERED),
    // instead of meeting the agent the other one started.
    const busy = this.#restoring.get(record.agentId);
    if (busy !== undefined) {
      await busy;
      return this.forAnswer(requestId, options, this.#d.tree.requests.hasOpenRequest(requestId));
    }
    const restoring = this.#restoreHeld(requestId, record, scope, options);
    const done = restoring.catch(() => {});
    this.#restoring.set(record.agentId, done);
    try {
      await restoring;
    } catch (error) {
      // Refused because another live process took this very answer meanwhile (and carries it
      // forward): for this answer, that is a second one.
      if (
        isTroupeError(error, 'ERR_CONVERSATION_BUSY') &&
        (await store.getRequest(scope, requestId))?.status === 'answered'
      ) {
        throw new InvalidArgumentError(`request ${requestId} was already answered: an answer is taken once`, {
          code: 'ERR_REQUEST_ALREADY_ANSWERED',
          cause: error,
        });
      }
      throw error;
    } finally {
      if (this.#restoring.get(record.agentId) === done) this.#restoring.delete(record.agentId);
    }
  }

  // The restore itself: the conversation of `record`, held here or not, started with the caller's scope.
  async #restoreHeld(requestId: string, record: RequestRecord, scope: Scope, options: AnswerOptions): Promise<void> {
    const store = this.#store;
    const held = this.#d.agents.get(record.agentId);
    const ours =
      held !== undefined &&
      held.conversationId === record.conversationId &&
      (await store.getRequest(held.scope, requestId)) !== undefined;
    if (ours && held.status !== 'running') {
      // This conversation, held without its question (being stopped as the answer came, or a copy
      // older than what is saved): let it go, and restore what is saved below.
      await this.#d.stopAgent(record.agentId);
    } else if (held !== undefined) {
      // Held here without this question: another conversation under the same id (agent ids are one
      // namespace per supervisor, across tenants), or this one busy with a message. Its answer would
      // reach the wrong agent, or be lost.
      throw new InvalidArgumentError(
        ours
          ? `request ${requestId} is open in the store for conversation ${record.conversationId}, whose agent ${record.agentId} is running a message here without it (a copy older than what is saved): answer again once that message has ended; the request stays open`
          : `request ${requestId} is open for conversation ${record.conversationId} of agent ${record.agentId}, but this supervisor holds another conversation under that id (agent ids are unique per supervisor, across tenants): stopAgent("${record.agentId}") and answer again, or give each tenant's agents their own ids (for example "<tenant>.<name>"); the request stays open`,
        { code: 'ERR_AGENT_ID_IN_USE' },
      );
    }
    const ctx: PersistenceContext = { agentId: record.agentId, conversationId: record.conversationId };
    const envelope = await store.loadState(scope, ctx);
    const name = (envelope as { agentName?: unknown } | undefined)?.agentName;
    const def = typeof name === 'string' ? this.#d.agentsByName.get(name) : undefined;
    if (def === undefined) {
      throw new InvalidArgumentError(
        `request ${requestId} belongs to agent ${record.agentId} ("${String(name)}"), which this supervisor does not know by name: pass it in options.agents, or startAgent it first (the request stays open)`,
        { code: 'ERR_UNKNOWN_AGENT' },
      );
    }
    await this.#d.startAgent(def, {
      agentId: record.agentId,
      conversationId: record.conversationId,
      scope,
      ...(options.toolContext === undefined ? {} : { toolContext: options.toolContext }),
    });
  }
}

/**
 * How many subagents the message a state is in may have spawned: its task
 * calls since the last user message (a call checkpointed is spawned after).
 * An upper bound: ids past the saved counter are never given twice.
 */
function tasksOfMessage(state: LoopState): number {
  const messages = state.messages;
  let n = 0;
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (m === undefined || m.role === 'user') break;
    if (m.role === 'assistant') for (const c of m.toolCalls ?? []) if (c.name === 'task') n++;
  }
  return n;
}

function isEndedRow(row: RunRecord): boolean {
  return row.status !== 'running' && row.status !== 'suspended' && row.status !== 'interrupted';
}

/** A run of `rootRunId`'s tree (itself or a descendant, by parent) that the store has running. */
function runningIn(rows: readonly RunRecord[], rootRunId: string): RunRecord | undefined {
  const tree = new Set([rootRunId]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const r of rows) {
      if (!tree.has(r.runId) && r.parentRunId !== undefined && tree.has(r.parentRunId)) {
        tree.add(r.runId);
        grew = true;
      }
    }
  }
  return rows.find((r) => r.status === 'running' && tree.has(r.runId));
}
