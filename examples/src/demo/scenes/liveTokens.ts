import { editor } from '../../agents/editor.js';
import { sharedNow } from '../../agents/probe.js';
import { demoScope } from '../demoScope.js';
import { formatDuration, type Narrator } from '../Narrator.js';
import type { Stage } from '../Stage.js';
import { TokenLines } from '../TokenLines.js';
import { fig } from '../wrapText.js';

/**
 * A real model's tokens, as they are written: the editor (supervisor thread)
 * hands the figures this run measured to the writer, whose model streams
 * from a worker thread; `agent.stream` yields the writer's deltas with the
 * path they came from. Skipped, with a line saying how to turn it on, when
 * no model server is configured.
 */
export async function liveTokens(
  stage: Stage,
  model: { readonly model: string; readonly baseURL: string } | undefined,
  figures: string,
): Promise<void> {
  const tour: Narrator = stage.tour;
  const { supervisor, out } = stage;
  stage.begin('9. Live tokens from a model on a worker thread');
  if (model === undefined) {
    tour.note(
      'Skipped: set TROUPE_MODEL_BASE_URL (an OpenAI-compatible /v1 root, e.g. http://127.0.0.1:11434/v1 for Ollama) and TROUPE_MODEL to watch a model write from a worker thread.',
    );
    await stage.end();
    return;
  }
  tour.say(`model ${fig(model.model)} at ${model.baseURL}; the writer's tokens as they arrive:`);
  const agent = await supervisor.startAgent(editor, { agentId: 'editor', conversationId: stage.run, scope: demoScope });
  const lines = new TokenLines(out.width, '   │ ');
  out.follow(() => [lines.partial, ...stage.tree.render(out.style)].filter((l) => l !== ''));
  const t0 = sharedNow();
  const stream = agent.stream(
    `In two or three short sentences, tell an engineer what these figures, measured just now on their machine, show:\n${figures}`,
  );
  let text = '';
  let chunks = 0;
  let firstAt = Number.NaN;
  const sources = new Set<string>();
  for await (const chunk of stream) {
    if (chunk.type !== 'text') continue;
    if (chunks === 0) firstAt = sharedNow();
    chunks++;
    text += chunk.text;
    sources.add(chunk.path.join(' > '));
    out.print(...lines.push(chunk.text).map((l) => out.style.cyan(l)));
  }
  const reply = await stream.reply;
  const doneAt = sharedNow();
  out.print(...lines.end().map((l) => out.style.cyan(l)));
  await stage.showTree();
  tour.check(
    reply.status === 'done' && chunks > 1 && firstAt < doneAt,
    `${fig(chunks)} text deltas; the first reached the host ${fig(formatDuration(firstAt - t0))} after the message was sent, ${formatDuration(doneAt - firstAt)} before the reply`,
    { reply, chunks },
  );
  tour.record('first token', formatDuration(firstAt - t0), `from a model on a worker thread (${chunks} deltas)`);
  tour.check(
    reply.status === 'done' && sources.size === 1 && sources.has('editor > editor-sub-1') && reply.text === text,
    `every delta came from editor > editor-sub-1 (the writer, on a worker), in order: they add up to the editor's answer`,
    { sources: [...sources], reply, text },
  );
  await stage.end();
}
