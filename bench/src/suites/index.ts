// The catalog of suites: what `pnpm bench` shows, checks and schedules, without loading any suite.
// A suite's code (and the frameworks, drivers and servers it measures) is imported only in the
// child process that runs it: bad input is refused, and --help shown, in a tenth of a second.
import type { SuiteInfo } from '../Suite.js';

/** Every suite `pnpm bench` knows, in the order a full run takes them. */
export const suites: readonly SuiteInfo[] = [
  {
    name: 'core',
    description: 'tool-context build and a 10-operation ContextUpdate fold',
    placementSensitive: false,
    inDefaultRun: true,
    load: async () => (await import('./core.js')).coreSuite,
  },
  {
    name: 'cancel',
    description: 'isCancelled() cost, cancel → notice in a worker (polling, signal), push-down, vs postMessage',
    placementSensitive: true,
    inDefaultRun: true,
    load: async () => (await import('./cancel.js')).cancelSuite,
  },
  {
    name: 'host',
    description:
      'the host channel: one worker → supervisor call, own protocol vs comlink (filtered and not) vs a bare echo',
    placementSensitive: true,
    inDefaultRun: true,
    load: async () => (await import('./host.js')).hostSuite,
  },
  {
    name: 'hostile',
    description: `a worker's flood of valid messages: the supervisor loop's longest stall, close({ timeoutMs }) under it`,
    placementSensitive: false,
    inDefaultRun: true,
    load: async () => (await import('./hostile.js')).hostileSuite,
  },
  {
    name: 'subagent',
    description:
      'trivial subagent run vs raw piscina, runs/s, 300k-run soak, never-yielding tool killed at its deadline',
    placementSensitive: true,
    inDefaultRun: true,
    load: async () => (await import('./subagent.js')).subagentSuite,
  },
  {
    name: 'supervisor',
    description:
      'fan-out of 100 subagents vs the same tasks on piscina, suspend→answer→resume, 10,000 answers in one message, a question among running siblings, cancelling a 100-run tree, 100k-run soak',
    placementSensitive: false,
    inDefaultRun: true,
    load: async () => (await import('./supervisor.js')).supervisorSuite,
  },
  {
    name: 'persistence',
    description:
      'SQLite turn commit p50/p99, saveMessage rate, restoring 1,000 suspended conversations, resident heap, RSS while conversations pass through; the same of PostgreSQL (a server it starts) and the takeover of a killed API host',
    placementSensitive: false,
    inDefaultRun: true,
    flags: {
      store: { type: 'string', value: 'sqlite|postgres', description: "one store's figures only (default: both)" },
    },
    load: async () => (await import('./persistence.js')).persistenceSuite,
  },
  {
    name: 'scope',
    description: 'scope copy per hop (lean…1 MiB, 1–8 hops) vs structuredClone, postMessage, piscina, memcpy',
    placementSensitive: (flags) => flags.file === undefined,
    flags: {
      file: {
        type: 'string',
        value: '<file>',
        description:
          'measure your own scope (a JSON file): per-hop cost, what a new scope costs, size against the budget, heaviest keys',
      },
      hops: { type: 'string', value: 'n', description: 'with --file: a chain of n subagents (default 1)' },
      samples: { type: 'string', value: 'n', description: 'with --file: runs measured (default 300)' },
      'new-scope-samples': {
        type: 'string',
        value: 'n',
        description: 'with --file: runs with a scope never seen (default 20)',
      },
      budget: {
        type: 'string',
        value: 'bytes',
        description: 'with --file: the scope budget to hold it against (default 4096)',
      },
    },
    inDefaultRun: true,
    load: async () => (await import('./scope.js')).scopeSuite,
  },
  {
    name: 'ab',
    description:
      'this build vs another built checkout (--against <dir>), blocks interleaved in one process: lean hop own cost, nested hop, fan-out turn; paired differences',
    placementSensitive: true,
    inDefaultRun: false,
    flags: {
      against: {
        type: 'string',
        value: '<dir>',
        description: 'the root of another built checkout to measure side by side with this one (. = the noise floor)',
      },
      blocks: {
        type: 'string',
        value: 'n',
        description: 'interleaved blocks per build, 2 to 200 (default 12, 4 quick)',
      },
    },
    load: async () => (await import('./ab.js')).abSuite,
  },
  {
    name: 'models',
    description:
      'model calls (@troupe/openai, and @troupe/ai-sdk on @ai-sdk/anthropic): abort → rejection in every phase (vs the bare SDK in its backoff), stalled streams, deltas from a worker to the host (vs the bare SDK / the provider model in one thread)',
    placementSensitive: false,
    inDefaultRun: true,
    load: async () => (await import('./models.js')).modelsSuite,
  },
  {
    name: 'mcp',
    description:
      'MCP tool calls (@troupe/mcp): from a worker, one connection per thread, vs a bare SDK client on one thread; what a host-operation client would add; the per-thread connect cost',
    placementSensitive: false,
    inDefaultRun: true,
    load: async () => (await import('./mcp.js')).mcpSuite,
  },
  {
    name: 'otel',
    description: 'tracing: an instrumented site with no bridge, a span with the bridge, the fan-out traced',
    placementSensitive: false,
    inDefaultRun: true,
    load: async () => (await import('./otel.js')).otelSuite,
  },
  {
    name: 'peers',
    description:
      'Troupe vs OpenAI Agents JS, the AI SDK and LangGraph.js on one scripted workload (trivial run, CPU fan-out, cancel, never-yielding tool, question)',
    placementSensitive: false,
    inDefaultRun: false,
    load: async () => (await import('./peers.js')).peersSuite,
  },
  {
    name: 'distributed',
    description:
      'scale-out over BullMQ/Redis (own Redis): cross-host cancel, overhead vs a raw job, relayed call, failover, fan-out over 1-3 hosts (--cancel: the cancel alone, with its breakdown)',
    placementSensitive: (flags) => flags.cancel === true,
    inDefaultRun: true,
    flags: {
      cancel: {
        type: 'boolean',
        description:
          'the cross-host cancel alone, pinned and unpinned: against pub/sub and its raw baseline, then again with where its time goes',
      },
    },
    load: async () => (await import('./distributed.js')).distributedSuite,
  },
];

/** Find a suite by name. */
export function findSuite(name: string): SuiteInfo | undefined {
  return suites.find((s) => s.name === name);
}
