import { type LoopState, type ModelToolCall, TroupeError } from '@troupe/core';
import { type PendingCall, resolvedCall } from '@troupe/core/internal';
import type { RequestBook } from './Requests.js';
import type { RunEvents } from './RunEvents.js';
import { hostRequest, type RequestEntry, type RunNode, taskResultOf } from './RunNode.js';

const NO_EVENTS: readonly never[] = Object.freeze([]);

/** An answer a suspended run resumes with, and the open call of its state it answers. */
export interface DeliveredAnswer {
  readonly entry: RequestEntry;
  readonly call: ModelToolCall;
}

/** What a suspended run's open calls came to (see {@link reviewOpenCalls}). */
export interface OpenCallsReview {
  /** Its state: ended children's outcomes on their calls, its questions named by the host's ids. */
  readonly state: LoopState;
  /** Its calls still without a result (questions, answered or not, and suspended children). */
  readonly open: number;
  /** The answers waiting for it whose call is open in its state, in call order: all delivered at its next resume. */
  readonly answers: readonly DeliveredAnswer[];
}

/**
 * One pass over the open calls of a suspended run, however many answers
 * reached it: a `task` call whose child ended meanwhile gets the child's
 * outcome, one whose child did not come back (a restart) an
 * `ERR_INTERRUPTED` result; a question the state holds that the book does not
 * know is opened (never as an approval: what a worker's state claims about
 * approval is not taken); every question is named by the host's id (what
 * the answer and a saved state carry); and each answer waiting in the book
 * whose call is open is picked for the resume. The state changes in one
 * copy of `pending`, made at its first change, never one per call; the
 * state itself when nothing changed. The book's entries are opened here; the
 * answers are taken by the caller.
 */
export function reviewOpenCalls(
  node: RunNode,
  state: LoopState,
  requests: RequestBook,
  events: RunEvents,
): OpenCallsReview {
  const pending = state.pending;
  if (pending === undefined) return { state, open: 0, answers: [] };
  const own = requests.of(node);
  const waiting = requests.answered(node);
  const answers: DeliveredAnswer[] = [];
  let next: PendingCall[] | undefined;
  let open = 0;
  for (let i = 0; i < pending.length; i++) {
    const p = pending[i] as PendingCall;
    if (p.result !== undefined) continue;
    const id = p.call.id;
    if (p.delegated === true) {
      const child = node.childByCall.get(id);
      if (child !== undefined && child.phase === 'ended') {
        // It ended while this run still ran (a deferred call, or a suspended child answered meanwhile).
        const outcome = taskResultOf(child, node.agent.mergeMetadataFrom.has(child.agent.name));
        next ??= [...pending];
        next[i] = resolvedCall(p, outcome);
        if (child.deferredAt !== undefined) events.deferredCallStopped(node, id, child.deferredAt, outcome);
      } else if (child === undefined) {
        // A child that did not come back (interrupted by a crash, or never saved): the call fails, the run goes on.
        next ??= [...pending];
        next[i] = resolvedCall(p, {
          status: 'error',
          error: new TroupeError(
            `the subagent of task call ${id} of ${node.agentId} was interrupted by a restart (its side effects may have happened): check, then delegate again if needed`,
            { code: 'ERR_INTERRUPTED' },
          ),
          events: NO_EVENTS,
        });
      }
      if ((next?.[i] ?? p).result === undefined) open++;
      continue;
    }
    open++;
    let entry = own.get(id);
    // A question the run reported (an approval is opened by the book, when the handler says ask):
    // what a worker's state claims about approval is never taken.
    if (entry === undefined && p.request !== undefined) entry = requests.open(node, id, p.request, false);
    if (entry === undefined) continue;
    // The state names the question by the host's id from now on (the answer, and what is saved, carry it).
    if (p.request?.id !== entry.id) {
      next ??= [...pending];
      next[i] = { ...p, request: hostRequest(entry) };
    }
    if (entry.answer !== undefined && waiting.get(id) === entry) answers.push({ entry, call: p.call });
  }
  return { state: next === undefined ? state : { ...state, pending: next }, open, answers };
}
