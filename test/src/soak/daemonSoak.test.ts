// A daemon’s day on one supervisor (memory store, maxIdleAgents 3): 4,000
// (2,000 at the default TROUPE_TEST_DEPTH) cycles of messages with subagents on worker threads, questions answered,
// declined, expired and withdrawn, cancels fired from events, tool timeouts
// and retries, a worker killed by process.exit every 97 cycles, conversations
// started, stopped, let go and reloaded, streams read fully or abandoned, the
// otel bridge installed and stopped. Between cycle 1,000 and 4,000 (forced
// GC at quiet points) nothing may grow per cycle: heap, active resources,
// listeners on the supervisor and on a signal reused for every send,
// stats(), open file descriptors. (Held: this passes; it guards the daemon path.)
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { byDepth } from '../fixtures/testDepth.js';
import { describeSamples, memoryOpen, perCycle, type Sample, soak } from './soak.js';

/** 4,000 cycles in the deep tier (TROUPE_TEST_DEPTH=deep), 2,000 in pnpm test: growth is measured from cycle 1,000 on. */
const CYCLES = byDepth({ quick: 2000, deep: 4000 });

describe('daemon soak, memory store', () => {
  it(`nothing grows per cycle between cycle 1,000 and ${CYCLES.toLocaleString('en')}`, async () => {
    const run = await soak({
      cycles: CYCLES,
      sampleEvery: 1000,
      open: memoryOpen(3),
      restartEvery: 0,
      otelEvery: 7,
      seed: 7,
    });
    await run.supervisor().close({ timeoutMs: 5000 });
    const a = run.samples[0] as Sample;
    const b = run.samples[run.samples.length - 1] as Sample;
    const report = `\n${describeSamples(run.samples)}\n${JSON.stringify(run.counts)}`;
    for (const k of [
      'reply.done',
      'reply.cancelled',
      'reply.suspended',
      'withdraw',
      'answer.decline',
      'stream.abandon',
      'reload',
    ]) {
      assert.ok((run.counts[k] ?? 0) > 0, `the soak exercised ${k}${report}`);
    }
    // Closed questions (10,000) and ended runs (1,024) are remembered in bounded rings that are still
    // filling here: allow ~1 KiB a cycle.
    assert.ok(perCycle(a, b, (s) => s.heap) < 1024, `heap grows per cycle${report}`);
    assert.ok(b.fds <= a.fds + 8, `file descriptors grow${report}`);
    for (const r of ['MessagePort', 'Timeout', 'Worker', 'Immediate']) {
      assert.ok((b.resources[r] ?? 0) <= (a.resources[r] ?? 0) + 2, `active ${r} resources grow${report}`);
    }
    assert.equal(b.supervisorListeners, a.supervisorListeners, `listeners on the supervisor grow${report}`);
    assert.equal(b.signalListeners, 0, `listeners on the reused AbortSignal remain${report}`);
    for (const k of [
      'runs',
      'pendingRequests',
      'suspendedSubagents',
      'pool.running',
      'pool.queued',
      'pool.tableSize',
    ]) {
      assert.equal(b.stats[k], 0, `stats().${k} at a quiet point${report}`);
    }
    assert.ok((b.stats.agents ?? 0) <= 6, `stats().agents stays bounded by the conversations held${report}`);
    assert.ok((b.stats['pool.openPorts'] ?? 0) <= 2, `stats().pool.openPorts stays bounded${report}`);
  });
});
