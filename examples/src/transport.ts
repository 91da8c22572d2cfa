import { createSupervisor, localTransport } from '@troupe/supervisor';

// The default transport, made explicitly: subagents on four worker threads of this process, a
// cancelled run killed if it ignores its cancel for half a second.
const supervisor = createSupervisor({ transport: localTransport({ threads: 4, graceMs: 500 }) });
await supervisor.ready();
console.log(`${supervisor.stats().pool.threads} threads ready`);
await supervisor.close();
