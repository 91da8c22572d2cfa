// A parent agent's tokens and its subagents', as they are written (set TROUPE_MODEL_BASE_URL: scripts do not stream).
import { createSupervisor } from '@troupe/supervisor';
import { coordinator } from './agents/coordinator.js';

const supervisor = createSupervisor({ pool: { threads: 2 } });
// One event per model call, from any thread: tokens (cached, reasoning), latency, time to first token, attempts.
supervisor.on('model.stop', (e) => {
  const { inputTokens = 0, outputTokens = 0, cachedInputTokens = 0 } = e.usage ?? {};
  console.error(
    `[${e.agentId}] ${e.model}: ${inputTokens} in (${cachedInputTokens} cached), ${outputTokens} out, ` +
      `${e.durationMs.toFixed(0)} ms, first token after ${e.timeToFirstTokenMs?.toFixed(0) ?? '-'} ms, ${e.attempts ?? 1} attempt(s)`,
  );
});

const agent = await supervisor.startAgent(coordinator, {
  scope: { tenantId: 'acme', userId: 'u-42', role: 'oncall', permissions: ['incidents:read'] },
  toolContext: { region: 'eu-west-1', requestId: 'req-1' },
  metadata: { incident: 'INC-7' },
});
const stream = agent.stream('analyst: checkout\nanalyst: billing');
let writer = '';
for await (const chunk of stream) {
  if (chunk.type !== 'text') continue;
  // Each chunk says whose model wrote it: the parent's id, or the path down to a subagent.
  const who = chunk.path.join(' > ');
  if (who !== writer) process.stdout.write(`\n${who}: `);
  writer = who;
  process.stdout.write(chunk.text);
}
const reply = await stream.reply;
console.log(`\n${reply.status}; tokens of the whole tree:`, reply.totalUsage);

await supervisor.close({ timeoutMs: 5000 });
