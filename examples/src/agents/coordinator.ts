// The parent agent of the demo and the daemon. It runs on the supervisor
// thread; its only tool is the built-in `task`, so it never competes with the
// supervisor for CPU — the subagents do the work on worker threads.
import { defineAgent } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import { analyst } from './analyst.js';
import { cruncher, validator } from './cpu.js';
import { delegateLines } from './delegateLines.js';
import { fetcher } from './fetcher.js';
import { exporter } from './flaky.js';
import { demoModel } from './model.js';
import { deployer, refunds } from './people.js';

export type { TaskError, TaskReport } from './delegateLines.js';

/**
 * Delegates every line `<subagent>: <instructions>` of the user's message as
 * a task, all in one turn (so they run in parallel), then answers with a JSON
 * array of {@link TaskReport}s in line order. Its model is a script standing
 * in for an LLM (deterministic, no network), or a real model when
 * `TROUPE_MODEL_BASE_URL` is set (see `demoModel`).
 *
 * Metadata written by `analyst` children flows back into the coordinator's
 * own metadata (`mergeMetadataFrom`); the other children's stays theirs.
 */
export const coordinator = defineAgent({
  name: 'coordinator',
  description: 'Splits work between specialists',
  module: import.meta.url,
  instructions:
    'Each line of the request reads "<subagent>: <instructions>". Call the task tool once per line, all in one turn, ' +
    'with that subagent and those instructions, word for word. When the results are back, answer with only a JSON array, ' +
    'one entry per line in order: {"ok": "<the result, as text>"} or {"error": <the error result>}.',
  subagents: [analyst, validator, cruncher, fetcher, deployer, refunds, exporter],
  mergeMetadataFrom: ['analyst'],
  model: demoModel(
    new ScriptedModel(
      [delegateLines],
      // One step, read from the transcript: the same script serves every message.
      { whenExhausted: 'repeat-last' },
    ),
    { temperature: 0 },
  ),
});
