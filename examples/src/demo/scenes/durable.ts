import { sqlitePersistence } from '@troupe/sqlite';
import type { AgentHandle, AgentReply } from '@troupe/supervisor';
import { coordinator } from '../../agents/coordinator.js';
import { demoScope } from '../demoScope.js';
import { formatDuration, type Narrator } from '../Narrator.js';
import { collect } from '../nextEvent.js';
import { reportsOf } from '../reportsOf.js';
import type { Stage } from '../Stage.js';
import { transcriptLine } from '../transcriptLine.js';
import { fig, fitText } from '../wrapText.js';
import { ENVIRONMENT } from './question.js';

/** The conversation the demo keeps from one run to the next (the others are deleted at the end of a run). */
export const DESK = 'desk';
const SERVICES = ['checkout-api', 'search-api', 'billing-api', 'payments-api'];
const SHOWN = 6;

/**
 * A conversation saved in SQLite, picked up by the next process: this run
 * shows what the last one left (its transcript and the question it left
 * open), answers that question — the same child resumes on a worker — and
 * leaves a new one open for the next run.
 */
export async function durable(stage: Stage): Promise<void> {
  const tour: Narrator = stage.tour;
  const { supervisor, person, out } = stage;
  stage.begin('6. Durable state: a conversation in SQLite outlives the process');
  // What the store has open for this conversation, before anything of it is started here.
  const open = await supervisor.listRequests(demoScope, { conversationId: DESK });
  const spawned = collect(supervisor, 'subagent.spawned');
  const desk = await supervisor.startAgent(coordinator, {
    agentId: DESK,
    conversationId: DESK,
    scope: demoScope,
    toolContext: { requestId: 'req-desk' },
  });
  const history = desk
    .snapshot()
    .messages.map((m) => transcriptLine(m, DESK))
    .filter((l) => l !== undefined);
  if (history.length === 0) {
    tour.say('Nothing saved yet: this is the first run on this database.');
  } else {
    tour.say(
      `restored conversation "${DESK}": ${history.length} messages${history.length > SHOWN ? ', the last:' : ':'}`,
    );
    out.print(...history.slice(-SHOWN).map((l) => fitText(`     ${l}`, out.width)));
  }
  let resumed = false;
  if (desk.status === 'interrupted') {
    // A run killed mid-turn: finish it from its last saved turn.
    tour.note('The last run was stopped mid-turn: resume() finishes its message from the last saved turn.');
    await desk.resume();
    resumed = true;
  }
  const pending = supervisor.pendingRequests().find((p) => p.agentId === DESK);
  if (desk.status === 'suspended' && pending !== undefined) {
    const { request, path } = pending;
    const fromFile = open.items.find((r) => r.request.id === request.id);
    stage.tree.restored(path, ['coordinator', 'deployer'], request.id);
    if (fromFile !== undefined) {
      tour.check(
        desk.snapshot().pendingRequest?.id === request.id,
        `the question the last run left open came back from the file (asked ${formatDuration(Date.now() - fromFile.openedAt)} ago by another process): "${request.prompt}"`,
        { pending: desk.snapshot().pendingRequest, open: open.items },
      );
    } else {
      tour.note(`resume() asked its question again: "${request.prompt}"`);
    }
    const child = path.at(-1) ?? '';
    const said = await person.ask(request.prompt, 'staging', (a) => ENVIRONMENT.test(a));
    stage.follow();
    const reply = await supervisor.answer(request.id, { ok: true, data: { env: said.answer } });
    const report = reportsOf(reply)[0];
    const spawns = spawned.filter((e) => e.agentId === child).map((e) => e.resumed);
    tour.check(
      report !== undefined &&
        'ok' in report &&
        report.ok.includes(' to ') &&
        // Restored, not spawned anew (after a resume(), the last spawn is the one that asked).
        (fromFile !== undefined ? spawns.length > 0 && spawns.every((r) => r) : spawns.at(-1) === true),
      `answered: ${child} resumed on a worker — the same child, restored, not a new one: ${report !== undefined && 'ok' in report ? report.ok : ''}`,
      { reply, spawns },
    );
  } else if (history.length > 0 && !resumed) {
    tour.note('The last run left no question open (it was stopped before it could).');
  }
  spawned.stop();
  // Leave a question open for the next run.
  const users = desk.snapshot().messages.filter((m) => m.role === 'user').length;
  const service = SERVICES[users % SERVICES.length] as string;
  stage.follow();
  const asked: AgentReply = await (desk as AgentHandle).send(`deployer: ${service}`);
  await stage.showTree();
  const peek = sqlitePersistence({ directory: stage.dir });
  let listed: readonly string[];
  try {
    listed = (await peek.listRequests(demoScope, { conversationId: DESK })).items.map((r) => r.request.id);
  } finally {
    await peek.close();
  }
  tour.check(
    asked.status === 'suspended' && listed.includes(asked.request.id),
    `a new question is left open for the next run ("${asked.status === 'suspended' ? asked.request.prompt : ''}"); a second connection to the file lists it`,
    { asked, listed },
  );
  tour.say(`Run ${fig('pnpm demo')} again (same directory) to see this conversation restored.`);
  await stage.end();
}
