// An API host in a process of its own (a test SIGKILLs it): a supervisor on
// bullmqTransport with a SQLite store, run from the parent over IPC. argv:
// <redis url> <queue> <store directory> <owner id> <scope json> <toolContext json>
// It sends `ready`, then obeys:
//   { send: text }  start the coordinator's conversation `c-1` (or restore it) and send it `text`;
//                   replies { sent } at once and { reply } when its reply comes;
//   { resume: true } restore `c-1` and resume it; replies { status } (as restored), then { reply }.
// It ends when its parent does (the IPC channel closing).
import { bullmqTransport } from '@troupe/bullmq';
import { sqlitePersistence } from '@troupe/sqlite';
import { createSupervisor } from '@troupe/supervisor';
import { coordinator } from './agents.js';

const [url, queue, directory, ownerId, scopeJson, toolContextJson] = process.argv.slice(2) as [
  string,
  string,
  string,
  string,
  string,
  string,
];
const scope = JSON.parse(scopeJson) as Record<string, unknown>;
const toolContext = JSON.parse(toolContextJson) as { effects: string; marker: string };
process.once('disconnect', () => process.exit(1));

const supervisor = createSupervisor({
  agents: [coordinator],
  transport: bullmqTransport({
    connection: url,
    build: 'cluster-test',
    queue,
    ownerId,
    // Long: the worker host must learn of the restart from the incarnation its lease names,
    // not from the old lease lapsing.
    ownerLeaseMs: 60_000,
    leaseCheckMs: 100,
    graceMs: 500,
    relaySlackMs: 1_000,
  }),
  persistence: sqlitePersistence({ directory }),
});
await supervisor.ready();

const ids = { agentId: 'c-1', conversationId: 'conv-1', scope, toolContext } as const;
const post = (message: unknown): void => {
  process.send?.(message);
};

let held: ReturnType<typeof supervisor.startAgent<typeof coordinator>> | undefined;
process.on('message', (m: { send?: string; resume?: boolean }) => {
  void (async () => {
    held ??= supervisor.startAgent(coordinator, ids);
    const agent = await held;
    if (m.send !== undefined) {
      const reply = agent.send(m.send);
      post({ sent: true });
      post({ reply: await reply });
    } else if (m.resume === true) {
      post({ status: agent.snapshot().status });
      post({ reply: await agent.resume() });
    }
  })().catch((error: unknown) => post({ error: String((error as Error)?.stack ?? error) }));
});
post('ready');
