// The fan-out's agents: the analyst's tool, on scripts only. The demo times
// threads against one event loop with them, so no model call may weigh on
// either side: with TROUPE_MODEL_BASE_URL set the other agents call the
// server, these two do not.
import { defineAgent } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import { inspectLogs } from './analyst.js';
import { delegateLines } from './delegateLines.js';
import { lastUserMessage } from './lastUserMessage.js';

/** Counts the errors of the service named by its task (the analyst's tool) and answers with the inspection as JSON. */
export const counter = defineAgent({
  name: 'counter',
  description: 'Counts the errors of one service',
  module: import.meta.url,
  instructions: 'Count the errors of the service you are given.',
  tools: [inspectLogs],
  model: new ScriptedModel([
    ({ messages }) => ({ toolCalls: [{ name: 'inspect_logs', arguments: { service: lastUserMessage(messages) } }] }),
    ({ lastToolResults }) => JSON.stringify(lastToolResults[0]?.content),
  ]),
});

/** Delegates each line `counter: <service>` of its message, all in one turn; merges the counters' findings. */
export const dispatcher = defineAgent({
  name: 'dispatcher',
  description: 'Fans work out to counters',
  module: import.meta.url,
  instructions: 'Delegate each line of the request to the subagent it names.',
  subagents: [counter],
  mergeMetadataFrom: ['counter'],
  model: new ScriptedModel([delegateLines], { whenExhausted: 'repeat-last' }),
});

/**
 * Answers at once. Spawned once per thread before anything is timed, so that
 * every worker has loaded this module — and what it imports, the model SDK
 * among them — before the fan-out measures it.
 */
export const counterReady = defineAgent({
  name: 'counter-ready',
  description: 'Loads the counters’ module on a worker',
  module: import.meta.url,
  instructions: 'Say ready.',
  model: ScriptedModel.answering('ready'),
});
