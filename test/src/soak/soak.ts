// The soak driver: many cycles of what a daemon does to one supervisor (and
// its restarts on the same store), with forced-GC measurements in between.

import { getEventListeners } from 'node:events';
import { readdirSync } from 'node:fs';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { instrument } from '@troupe/otel';
import {
  type AgentHandle,
  type AgentReply,
  createSupervisor,
  MemoryPersistence,
  type Supervisor,
} from '@troupe/supervisor';
import { boss, type Plan, type SubKind, sub } from './agents.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

export interface Sample {
  readonly cycle: number;
  readonly heap: number;
  readonly resources: Record<string, number>;
  readonly fds: number;
  readonly supervisorListeners: number;
  readonly signalListeners: number;
  readonly stats: Record<string, number>;
}

export interface SoakOptions {
  readonly cycles: number;
  readonly sampleEvery: number;
  /** Make a fresh store / supervisor. */
  readonly open: () => Supervisor;
  /** Close and reopen the supervisor every n cycles (0: never). */
  readonly restartEvery: number;
  /** Install and stop the otel bridge every n cycles (0: never). */
  readonly otelEvery: number;
  readonly seed: number;
  /** Keep one otel bridge installed the whole time (on the first supervisor). */
  readonly otelAlways?: boolean;
  /** Called at each sample, after the forced GC. */
  readonly onSample?: (cycle: number, supervisor: Supervisor) => void;
}

function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const flush = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

export async function settleGc(): Promise<number> {
  for (let i = 0; i < 4; i++) {
    gc();
    await flush();
  }
  gc();
  return process.memoryUsage().heapUsed;
}

function flatStats(stats: object, prefix = ''): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(stats)) {
    if (typeof v === 'number') out[prefix + k] = v;
    else if (typeof v === 'object' && v !== null) Object.assign(out, flatStats(v, `${prefix}${k}.`));
  }
  return out;
}

function resourceCounts(): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of process.getActiveResourcesInfo()) out[r] = (out[r] ?? 0) + 1;
  return out;
}

export function listenerTotal(s: Supervisor): number {
  let n = 0;
  for (const name of s.eventNames()) n += s.listenerCount(name as never);
  return n;
}

const SCOPE = { tenantId: 't', userId: 'u' };

export interface Soak {
  readonly samples: Sample[];
  readonly counts: Record<string, number>;
  readonly supervisor: () => Supervisor;
  readonly signal: AbortSignal;
}

/** Runs the soak; samples are taken at quiet points (no message running, no question open). */
export async function soak(options: SoakOptions): Promise<Soak> {
  const random = rng(options.seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)] as T;
  const reused = new AbortController(); // a caller's long-lived signal, passed to every send and never aborted
  const counts: Record<string, number> = {};
  const count = (k: string): void => {
    counts[k] = (counts[k] ?? 0) + 1;
  };
  let supervisor = options.open();
  const samples: Sample[] = [];
  // Agent ids whose conversations are held (or were let go): a rolling set of 6.
  const live: { agentId: string; conversationId: string; messages: number }[] = [];
  let nextId = 0;
  let leftOpen: string | undefined; // a request left open across a restart

  async function handleOf(slot: { agentId: string; conversationId: string }): Promise<AgentHandle> {
    const held = supervisor.agent(slot.agentId);
    if (held !== undefined) return held;
    count('reload');
    // Its toolContext again (never saved): a restore with none of its keys is refused (ERR_TOOL_CONTEXT_MISSING).
    return supervisor.startAgent(boss, {
      agentId: slot.agentId,
      conversationId: slot.conversationId,
      scope: SCOPE,
      toolContext: { requestId: `r${slot.agentId.slice(2)}` },
    });
  }

  async function settle(handle: AgentHandle, reply: AgentReply): Promise<void> {
    let r = reply;
    for (let guard = 0; r.status === 'suspended' && guard < 8; guard++) {
      const roll = random();
      if (roll < 0.45) {
        count('answer.ok');
        r = await supervisor.answer(r.request.id, { ok: true, data: { x: 1 } });
      } else if (roll < 0.75) {
        count('answer.decline');
        r = await supervisor.answer(r.request.id, { ok: false, reason: 'no' });
      } else {
        count('withdraw');
        await handle.cancel('user');
        return;
      }
    }
    if (r.status === 'suspended') await handle.cancel('user');
  }

  const SUBS: readonly (SubKind | 'none')[] = [
    'none',
    'quick',
    'quick',
    'quick',
    'ask',
    'ask',
    'expire',
    'crunch',
    'crunch',
    'tmo',
    'flaky',
    'flaky',
  ];
  const CANCEL_ON = ['subagent.spawned', 'tool.execute.start', 'model.start', 'agent.run.started'] as const;

  async function cycle(i: number): Promise<void> {
    // Rotate the conversations: a new one now and then, an old one stopped.
    if (live.length < 6 || random() < 0.05) {
      const id = nextId++;
      const slot = { agentId: `a-${id}`, conversationId: `c-${id}`, messages: 0 };
      await supervisor.startAgent(boss, { ...slot, scope: SCOPE, toolContext: { requestId: `r${id}` } });
      live.push(slot);
      count('start');
      if (live.length > 6) {
        const old = live.shift() as (typeof live)[number];
        if (supervisor.agent(old.agentId) !== undefined) await supervisor.stopAgent(old.agentId);
        count('stop');
      }
    }
    // Mostly the newest few (so the older ones go idle and get evicted, then reload).
    const slot = random() < 0.7 ? (live[live.length - 1 - Math.floor(random() * 2)] ?? live[0]) : pick(live);
    if (slot === undefined) return;
    if (slot.messages > 12) {
      // Keep transcripts short: a conversation of many messages is stopped and replaced.
      if (supervisor.agent(slot.agentId) !== undefined) await supervisor.stopAgent(slot.agentId);
      live.splice(live.indexOf(slot), 1);
      count('stop');
      return;
    }
    slot.messages++;
    const handle = await handleOf(slot);
    let kind = pick(SUBS);
    if (i % 97 === 0) kind = 'exit';
    const plan: Plan = { sub: kind, own: random() < 0.15 };
    const msg = JSON.stringify(plan);
    const mustCancel = kind === 'crunch' || random() < 0.08;
    let controller: AbortController | undefined;
    let off: (() => void) | undefined;
    if (mustCancel) {
      const c = new AbortController();
      controller = c;
      const event = kind === 'crunch' ? 'tool.execute.start' : pick(CANCEL_ON);
      const fire = (e: { agentId?: string }): void => {
        if (kind === 'crunch' && e.agentId === slot.agentId) return; // the parent's own tool: wait for the sub's
        off?.();
        c.abort();
      };
      supervisor.on(event, fire as never);
      off = () => supervisor.off(event, fire as never);
      count(`cancel.${event}`);
    }
    // (not AbortSignal.any: Node keeps every dependant signal of a long-lived one)
    const signal = controller === undefined ? reused.signal : controller.signal;
    let reply: AgentReply;
    if (random() < 0.3) {
      const stream = handle.stream(msg, { signal });
      if (random() < 0.5) {
        count('stream.full');
        for await (const _chunk of stream) {
          // read everything
        }
      } else {
        count('stream.abandon');
        for await (const _chunk of stream) break;
      }
      reply = await stream.reply;
    } else {
      count('send');
      reply = await handle.send(msg, { signal });
    }
    off?.();
    count(`reply.${reply.status}`);
    await settle(handle, reply);
  }

  async function restart(): Promise<void> {
    // Leave at most one question open across the restart, answer it on the new supervisor.
    await supervisor.close({ timeoutMs: 5000 });
    supervisor = options.open();
    count('restart');
    if (leftOpen !== undefined) {
      const id = leftOpen;
      leftOpen = undefined;
      const r = await supervisor.answer(id, { ok: true }, { scope: SCOPE, toolContext: { requestId: 'r-restored' } });
      count(`restored.${r.status}`);
      if (r.status === 'suspended') {
        for (const slot of live) {
          const h = supervisor.agent(slot.agentId);
          if (h !== undefined && h.snapshot().status === 'suspended') await h.cancel('user');
        }
      }
    }
  }

  async function sample(i: number): Promise<void> {
    // Quiet point: everything idle, nothing open.
    const heap = await settleGc();
    samples.push({
      cycle: i,
      heap,
      resources: resourceCounts(),
      fds: readdirSync('/proc/self/fd').length,
      supervisorListeners: listenerTotal(supervisor),
      signalListeners: getEventListeners(reused.signal, 'abort').length,
      stats: flatStats(supervisor.stats()),
    });
    options.onSample?.(i, supervisor);
  }

  let tracing: { stop(): void } | undefined;
  const always = options.otelAlways === true ? instrument(supervisor) : undefined;
  for (let i = 1; i <= options.cycles; i++) {
    if (options.otelEvery > 0 && i % options.otelEvery === 0) {
      if (tracing === undefined) {
        tracing = instrument(supervisor);
        count('otel.install');
      } else {
        tracing.stop();
        tracing = undefined;
        count('otel.stop');
      }
    }
    await cycle(i);
    if (options.restartEvery > 0 && i % options.restartEvery === 0) {
      tracing?.stop();
      tracing = undefined;
      // Sometimes leave a question open for the next supervisor.
      if (leftOpen === undefined && random() < 0.5) {
        const slot = live[live.length - 1];
        if (slot !== undefined) {
          const h = await handleOf(slot);
          const r = await h.send(JSON.stringify({ sub: 'ask', own: false } satisfies Plan));
          if (r.status === 'suspended') leftOpen = r.request.id;
        }
      }
      await restart();
    }
    if (i % options.sampleEvery === 0) {
      tracing?.stop();
      tracing = undefined;
      await sample(i);
    }
  }
  tracing?.stop();
  always?.stop();
  return { samples, counts, supervisor: () => supervisor, signal: reused.signal };
}

export function memoryOpen(maxIdleAgents = 3): () => Supervisor {
  return () =>
    createSupervisor({
      agents: [boss, sub],
      pool: { threads: 2, graceMs: 200 },
      maxIdleAgents,
      persistence: new MemoryPersistence({ maxConversations: 64 }),
    });
}

/** Growth per cycle of a figure between two samples. */
export function perCycle(a: Sample, b: Sample, f: (s: Sample) => number): number {
  return (f(b) - f(a)) / (b.cycle - a.cycle);
}

export function describeSamples(samples: readonly Sample[]): string {
  return samples
    .map(
      (s) =>
        `#${s.cycle} heap=${(s.heap / 1024).toFixed(0)}KiB fds=${s.fds} svL=${s.supervisorListeners} sigL=${s.signalListeners} res=${JSON.stringify(s.resources)} stats=${JSON.stringify(s.stats)}`,
    )
    .join('\n');
}
