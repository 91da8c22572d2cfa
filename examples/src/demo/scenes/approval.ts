import { isMainThread } from 'node:worker_threads';
import type { ApprovalDecision, ApprovalHandler } from '@troupe/core';
import { coordinator } from '../../agents/coordinator.js';
import { createProbe, Probe } from '../../agents/probe.js';
import { demoScope } from '../demoScope.js';
import type { Narrator } from '../Narrator.js';
import { reportsOf } from '../reportsOf.js';
import type { Stage } from '../Stage.js';

/** The approval policy of the host, with a log of what it decided and where. */
export function refundPolicy() {
  const decisions: { agentId: string; amount: number; decision: string; onMainThread: boolean }[] = [];
  const handler: ApprovalHandler = (request) => {
    const { order, amount } = request.arguments as { order: string; amount: number };
    const decision: ApprovalDecision =
      amount <= 100
        ? { decision: 'approve' }
        : amount > 10_000
          ? { decision: 'reject', reason: 'over the 10,000 limit' }
          : { decision: 'ask', prompt: `Refund ${amount} on order ${order}?` };
    decisions.push({ agentId: request.agentId, amount, decision: decision.decision, onMainThread: isMainThread });
    return decision;
  };
  return { handler, decisions };
}

const YES = /^(y|yes)$/i;
const NO = /^(n|no)$/i;

/** Tools that need approval: the host's policy decides on the supervisor thread, a person decides the middle case. */
export async function approval(stage: Stage, policy: ReturnType<typeof refundPolicy>): Promise<void> {
  const tour: Narrator = stage.tour;
  const { supervisor, person } = stage;
  stage.begin('5. Approval: the host decides, on the supervisor thread');
  const probe = createProbe();
  const billing = await supervisor.startAgent(coordinator, {
    agentId: 'billing',
    conversationId: stage.run,
    scope: demoScope,
    toolContext: { requestId: 'req-billing', probe },
  });
  const reply = await billing.send('refunds: A-1=40, A-2=2500, A-3=50000');
  const ranBefore = Atomics.load(probe, Probe.refundRuns);
  const prompt = reply.status === 'suspended' ? reply.request.prompt : '';
  const said = await person.ask(`${prompt} (yes/no)`, 'yes', (a) => YES.test(a) || NO.test(a));
  const yes = YES.test(said.answer);
  stage.follow();
  const done = await supervisor.answer(reply.status === 'suspended' ? reply.request.id : '', { ok: yes });
  await stage.showTree();
  const asked = policy.decisions.map((d) => `${d.amount} → ${d.decision}`).join(', ');
  tour.check(
    policy.decisions.length === 3 &&
      policy.decisions.every((d) => d.onMainThread && d.agentId === 'billing-sub-1') &&
      asked === '40 → approve, 2500 → ask, 50000 → reject',
    `the policy saw billing-sub-1's three refund calls on the supervisor thread: ${asked}`,
    policy.decisions,
  );
  tour.check(
    reply.status === 'suspended' && reply.request.kind === 'approval' && ranBefore === 1,
    `"ask" became a request of kind approval ("${prompt}"); until it was answered only the approved refund ran`,
    { reply, runs: ranBefore },
  );
  const [report] = reportsOf(done);
  const results = report !== undefined && 'ok' in report ? (JSON.parse(report.ok) as unknown[]) : [];
  const code = (i: number) => (results[i] as { error?: { code?: string } } | undefined)?.error?.code;
  const runs = Atomics.load(probe, Probe.refundRuns);
  tour.check(
    results[0] === 'refunded 40 on A-1' &&
      (yes ? results[1] === 'refunded 2500 on A-2' && runs === 2 : code(1) !== undefined && runs === 1) &&
      code(2) === 'ERR_APPROVAL_DENIED',
    yes
      ? 'a person said yes: A-2 ran once; A-3 never ran (ERR_APPROVAL_DENIED)'
      : `a person said no: A-2 never ran (${code(1)}), nor A-3 (ERR_APPROVAL_DENIED)`,
    { results, runs },
  );
  await stage.end();
}
