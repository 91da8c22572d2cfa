import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  type Agent,
  type AgentId,
  type Answer,
  type CancelReason,
  createId,
  deepFreeze,
  type LoopState,
  type RunId,
} from '@troupe/core';
import {
  type HostApprovalRequest,
  type HostCheckpoint,
  type HostEvent,
  HostFeature,
  type HostTaskRequest,
  type HostTaskResult,
  TELEMETRY_EVENTS,
  telemetryBit,
} from '@troupe/core/internal';
import { systemClock } from '@troupe/subagent';
import { mintCapability } from '../internal/capability.js';
import type {
  Attempt,
  AttemptEnd,
  AttemptHandle,
  AttemptWork,
  HostOperations,
  RunEnd,
  RunTransport,
} from '../RunTransport.js';
import {
  approvalSeeker,
  asker,
  clockReader,
  crasher,
  delegator,
  echo,
  overrunner,
  poller,
  structured,
  stubborn,
} from './conformanceAgents.js';

/**
 * Options of {@link runTransportConformance}.
 *
 * @example
 * ```ts
 * const options: TransportConformanceOptions = { graceMs: 500, timeoutMs: 120_000 }
 * ```
 */
export interface TransportConformanceOptions {
  /**
   * The grace period the transports under test give a cancelled attempt before they kill it
   * (ms; make them with it). Default 250.
   */
  readonly graceMs?: number;
  /** How long one test may take before it fails (ms). Default 60,000. */
  readonly timeoutMs?: number;
}

/** Everything telemetry, so every event a worker forwards comes through the host operations. */
const TELEMETRY = [...TELEMETRY_EVENTS].reduce<number>(
  (bits, name) => bits | telemetryBit(name),
  HostFeature.telemetry,
);

/** The host operations of one attempt, recorded in order, with what the test wants them to answer. */
class Host implements HostOperations {
  readonly agentId: string;
  readonly runId: string;
  /** Every call, in order, with the sequence number it came in at. */
  readonly calls: { readonly op: string; readonly seq: number }[] = [];
  readonly received: HostEvent[] = [];
  readonly approvals: HostApprovalRequest[] = [];
  readonly tasks: HostTaskRequest[] = [];
  readonly checkpoints: HostCheckpoint[] = [];
  /** The sequence number at which the attempt's end was seen (calls after it are late). */
  endedAt: number | undefined;
  #seq = 0;
  readonly #started: Promise<void>;
  #markStarted: () => void = () => {};
  decision: unknown = { decision: 'approve' };
  taskResult: HostTaskResult = { status: 'done', result: 'hi from the child', events: [] };

  constructor(agentId: string, runId: string) {
    this.agentId = agentId;
    this.runId = runId;
    this.#started = new Promise<void>((resolve) => {
      this.#markStarted = resolve;
    });
  }

  /** Resolves once a tool of the attempt started (its `tool.execute.start` came through). */
  toolStarted(): Promise<void> {
    return this.#started;
  }

  #record(op: string): void {
    this.calls.push({ op, seq: this.#seq++ });
  }

  /** Mark the end of the attempt: anything recorded after it is a late call. */
  end(): void {
    this.endedAt = this.#seq;
  }

  get late(): number {
    return this.endedAt === undefined ? 0 : this.calls.filter((c) => c.seq >= (this.endedAt as number)).length;
  }

  approve(request: HostApprovalRequest): Promise<unknown> {
    this.#record('approve');
    this.approvals.push(request);
    return Promise.resolve(this.decision);
  }

  task(request: HostTaskRequest): Promise<HostTaskResult | undefined> {
    this.#record('task');
    this.tasks.push(request);
    return Promise.resolve(this.taskResult);
  }

  events(events: readonly HostEvent[]): void {
    this.#record('events');
    for (const e of events) {
      this.received.push(e);
      if (e[0] === 't' && e[1] === 'tool.execute.start') this.#markStarted();
    }
  }

  checkpoint(checkpoint: HostCheckpoint): Promise<unknown> {
    this.#record('checkpoint');
    this.checkpoints.push(checkpoint);
    return Promise.resolve(true);
  }
}

interface Dispatched {
  readonly handle: AttemptHandle;
  readonly host: Host;
  readonly spec: Attempt;
  /** The end, with the host marked ended at the moment it arrived. */
  readonly ended: Promise<AttemptEnd>;
  placed: number;
}

/**
 * The promises every {@link RunTransport} keeps, as a `node:test` suite on
 * real workers: one attempt ends exactly once, with every one of its host
 * operations served before its end and none after; a worker that dies ends
 * `crashed` and the transport goes on; approval, a nested task and a
 * question travel through the host operations; a suspended attempt resumes
 * with its answer; a cooperative cancel ends `cancelled`, an ignored one is
 * killed after the grace period (`forced`), `kill` at once; an attempt
 * dispatched cancelled never runs its tool; a queued attempt is withdrawn, a
 * started one is not; a tool past its own timeout that never yields is killed
 * (a forced `ToolTimeoutError`); the time left reaches the tools; `close`
 * drains, then ends what comes later `cancelled` (`shutdown`); `destroy` is
 * idempotent. `makeTransport` is called once per test; the suite starts,
 * closes and destroys what it makes. Run it with `node --test`.
 *
 * @example
 * ```ts
 * import { localTransport } from '@troupe/supervisor'
 * import { runTransportConformance } from '@troupe/supervisor/testing'
 *
 * runTransportConformance('local', () => localTransport({ threads: 2, graceMs: 250 }), { graceMs: 250 })
 * ```
 */
export function runTransportConformance(
  name: string,
  makeTransport: () => RunTransport | Promise<RunTransport>,
  options: TransportConformanceOptions = {},
): void {
  const graceMs = options.graceMs ?? 250;
  const timeout = options.timeoutMs ?? 60_000;

  describe(`RunTransport conformance: ${name}`, { timeout }, () => {
    const made: RunTransport[] = [];
    const hosts: Host[] = [];
    // A transport holds nothing open while its attempts run (its owner does): the suite is its owner.
    let keepAlive: ReturnType<typeof setInterval> | undefined;
    before(() => {
      keepAlive = setInterval(() => {}, 1 << 30);
    });

    after(async () => {
      clearInterval(keepAlive);
      await Promise.all(made.map((t) => t.destroy()));
      const late = hosts.filter((h) => h.late > 0);
      assert.deepEqual(
        late.map((h) => `${h.agentId}: ${h.late} host calls after its end`),
        [],
        'no host operation of an attempt is served after its end',
      );
    });

    async function started(): Promise<RunTransport> {
      const transport = await makeTransport();
      made.push(transport);
      transport.start({ clock: systemClock, emit: () => {}, listening: () => true });
      await transport.ready();
      return transport;
    }

    function dispatch(
      transport: RunTransport,
      agent: Agent,
      work: AttemptWork = { kind: 'start', input: 'hello', metadata: undefined },
      more: Partial<Pick<Attempt, 'timeoutMs' | 'cancelled' | 'features'>> = {},
    ): Dispatched {
      const agentId = createId('agent') as AgentId;
      const runId = createId('run') as RunId;
      const host = new Host(agentId, runId);
      hosts.push(host);
      const spec: Attempt = {
        runId,
        attempt: 1,
        capability: mintCapability(),
        agentId,
        parentAgentId: undefined,
        agent,
        scope: deepFreeze({ tenant: 'conformance' }),
        toolContext: deepFreeze({ flag: true }),
        work,
        timeoutMs: more.timeoutMs,
        features:
          more.features ?? HostFeature.approval | TELEMETRY | (agent.subagents.length > 0 ? HostFeature.spawn : 0),
        cancelled: more.cancelled,
        host,
        placed: () => {
          d.placed++;
        },
      };
      const handle = transport.dispatch(spec);
      let ends = 0;
      const ended = handle.ended.then((end) => {
        ends++;
        host.end();
        assert.equal(ends, 1, 'an attempt ends once');
        return end;
      });
      const d: Dispatched = { handle, host, spec, ended, placed: 0 };
      return d;
    }

    function statusOf(end: RunEnd): string {
      return end.status === 'cancelled'
        ? `cancelled:${end.reason}:${end.forced ? 'forced' : 'cooperative'}`
        : end.status;
    }

    it('an attempt ends exactly once with its result, every event of it delivered before its end', async () => {
      const t = await started();
      const a = dispatch(t, echo);
      const end = await a.ended;
      assert.equal(end.end.status, 'done', JSON.stringify(end.end));
      assert.match((end.end as { text: string }).text, /^echo: /);
      const names = a.host.received.filter((e) => e[0] === 't').map((e) => e[1]);
      assert.ok(names.includes('tool.execute.start') && names.includes('tool.execute.stop'), names.join(', '));
      assert.ok(a.host.calls.length > 0 && a.host.late === 0);
      assert.ok(a.placed <= 1, 'placed at most once');
    });

    it('a done attempt carries its structured output (the schema’s result) with its text', async () => {
      const t = await started();
      const end = (await dispatch(t, structured).ended).end;
      assert.equal(end.status, 'done', JSON.stringify(end));
      assert.deepEqual((end as { output?: unknown }).output, { city: 'Oslo', tempC: 4, unit: 'C' });
    });

    it('a worker that dies ends the attempt crashed (a defect, never a failure); the transport goes on', async () => {
      const t = await started();
      const crash = await dispatch(t, crasher).ended;
      assert.equal(crash.end.status, 'crashed', JSON.stringify(crash.end));
      const after = await dispatch(t, echo).ended;
      assert.equal(after.end.status, 'done');
    });

    it('approval is asked through the host operations, and its decision is what the tool gets', async () => {
      const t = await started();
      const yes = dispatch(t, approvalSeeker);
      const approved = await yes.ended;
      assert.equal(yes.host.approvals.length, 1);
      assert.equal(yes.host.approvals[0]?.toolName, 'deploy');
      assert.deepEqual(yes.host.approvals[0]?.arguments, { env: 'staging' });
      assert.match((approved.end as { text: string }).text, /deployed/);
      const no = dispatch(t, approvalSeeker);
      no.host.decision = { decision: 'reject', reason: 'not today' };
      const rejected = await no.ended;
      assert.equal(rejected.end.status, 'done');
      assert.match((rejected.end as { text: string }).text, /not today|denied|ERR_APPROVAL/i);
    });

    it('a nested task goes through the host operations; its result is what the task call returns', async () => {
      const t = await started();
      const a = dispatch(t, delegator);
      const end = await a.ended;
      assert.equal(a.host.tasks.length, 1);
      assert.equal(a.host.tasks[0]?.subagent, 'conformance-echo');
      assert.equal(end.end.status, 'done');
      assert.match((end.end as { text: string }).text, /hi from the child/);
    });

    it('a tool that asks a person suspends the attempt (its question an event); a resume with the answer ends done', async () => {
      const t = await started();
      const first = dispatch(t, asker);
      const suspended = await first.ended;
      assert.equal(suspended.end.status, 'suspended', JSON.stringify(suspended.end));
      const questions = first.host.received.filter((e) => e[0] === 'q');
      assert.equal(questions.length, 1, 'the question is reported before the end');
      const request = (questions[0] as readonly ['q', string, { id: string }])[2];
      const state = (suspended.end as { state: LoopState }).state;
      const answer: Answer = { id: request.id, ok: true, data: 'the blue one' };
      const resumed = dispatch(t, asker, {
        kind: 'resume',
        state,
        answers: [{ answer, expired: false }],
        approvedCalls: [],
      });
      const done = await resumed.ended;
      assert.equal(done.end.status, 'done', JSON.stringify(done.end));
      assert.match((done.end as { text: string }).text, /the blue one/);
    });

    it('cancel: a cooperative tool sees it, and the attempt ends cancelled with the reason, not forced', async () => {
      const t = await started();
      const a = dispatch(t, poller);
      await a.host.toolStarted();
      t.cancel(a.handle, 'user');
      const end = await a.ended;
      assert.equal(statusOf(end.end), 'cancelled:user:cooperative');
    });

    it('a cancel ignored past the grace period kills the attempt: cancelled, forced; the transport goes on', async () => {
      const t = await started();
      const a = dispatch(t, stubborn);
      await a.host.toolStarted();
      const at = Date.now();
      t.cancel(a.handle, 'parent');
      const end = await a.ended;
      assert.equal(statusOf(end.end), 'cancelled:parent:forced');
      assert.ok(Date.now() - at >= graceMs * 0.9, 'not killed before the grace period');
      assert.equal((await dispatch(t, echo).ended).end.status, 'done');
    });

    it('kill stops a started attempt at once: cancelled, forced', async () => {
      const t = await started();
      const a = dispatch(t, stubborn);
      await a.host.toolStarted();
      t.kill(a.handle, 'shutdown');
      const end = await a.ended;
      assert.equal(statusOf(end.end), 'cancelled:shutdown:forced');
    });

    it("an attempt dispatched cancelled (a child born during its parent's cancel) never runs its tool", async () => {
      const t = await started();
      const a = dispatch(t, poller, undefined, { cancelled: 'parent' });
      const end = await a.ended;
      assert.equal(end.end.status, 'cancelled');
      assert.equal((end.end as { reason: CancelReason }).reason, 'parent');
      assert.equal(
        a.host.received.some((e) => e[0] === 't' && e[1] === 'tool.execute.start'),
        false,
        'its tool never started',
      );
    });

    it('withdraw takes a queued attempt back (cancelled, never run); a started one is not withdrawn', async () => {
      const t = await started();
      const busy: Dispatched[] = [];
      for (let i = 0; i < t.slots; i++) busy.push(dispatch(t, stubborn));
      await Promise.all(busy.map((b) => b.host.toolStarted()));
      const queued = dispatch(t, echo);
      assert.equal(t.stats().queued >= 1, true, 'it waits for a slot');
      assert.equal(t.withdraw(queued.handle), true);
      const end = await queued.ended;
      assert.equal(statusOf(end.end), 'cancelled:user:cooperative');
      assert.equal(queued.host.calls.length, 0, 'nothing of it ran');
      assert.equal(t.withdraw(busy[0]?.handle as AttemptHandle), false, 'a started attempt is not withdrawn');
      for (const b of busy) t.kill(b.handle, 'shutdown');
      await Promise.all(busy.map((b) => b.ended));
    });

    it('a tool past its own timeout that never yields is killed: the attempt fails with a forced tool timeout', async () => {
      const t = await started();
      const end = await dispatch(t, overrunner).ended;
      assert.equal(end.end.status, 'failed', JSON.stringify(end.end));
      const error = (end.end as { error: Error & { code?: string; forced?: boolean } }).error;
      assert.equal(error.code, 'ERR_TOOL_TIMEOUT');
      assert.equal(error.forced, true);
      assert.equal((await dispatch(t, echo).ended).end.status, 'done', 'the transport goes on');
    });

    it('the time an attempt has left reaches its tools', async () => {
      const t = await started();
      const end = await dispatch(t, clockReader, undefined, { timeoutMs: 5_000 }).ended;
      assert.equal(end.end.status, 'done');
      const seen = JSON.parse((end.end as { text: string }).text.replace(/^timeLeft: /, '')) as { timeoutMs: number };
      assert.ok(seen.timeoutMs > 0 && seen.timeoutMs <= 5_000, JSON.stringify(seen));
    });

    it('stats count slots, what runs and what ended; canQueue holds while the queue has room', async () => {
      const t = await started();
      assert.ok(t.slots >= 1);
      assert.equal(t.canQueue(), true);
      const before = t.stats().completed;
      await Promise.all([dispatch(t, echo).ended, dispatch(t, echo).ended]);
      const s = t.stats();
      assert.equal(s.completed - before, 2);
      assert.equal(s.running, 0);
      assert.equal(s.queued, 0);
    });

    it('close waits for running attempts, then ends later ones cancelled (shutdown); destroy is idempotent', async () => {
      const t = await started();
      const running = dispatch(t, echo);
      await t.close({ drainMs: 30_000 });
      assert.equal((await running.ended).end.status, 'done', 'a running attempt was let finish');
      const late = dispatch(t, echo);
      assert.equal(statusOf((await late.ended).end), 'cancelled:shutdown:cooperative');
      await t.destroy();
      await t.destroy();
    });
  });
}
