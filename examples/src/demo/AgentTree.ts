// The live tree of the demo: every agent of the current scene, with what it
// is doing and for how long, built from the supervisor's events alone.
import type { Supervisor } from '@troupe/supervisor';
import { sharedNow } from '../agents/probe.js';
import { formatDuration } from './Narrator.js';
import type { Style } from './Style.js';

/** Where an agent is. */
export type NodeStatus =
  | 'queued'
  | 'running'
  | 'asking'
  | 'waiting'
  | 'done'
  | 'failed'
  | 'cancelled'
  | 'killed'
  | 'crashed';

interface TreeNode {
  readonly id: string;
  name: string;
  parent: string | undefined;
  status: NodeStatus;
  /** The tool it runs now. */
  tool: string | undefined;
  /** A word on how it ended, or what it asks. */
  note: string | undefined;
  /** The id of the question it asks, while it asks. */
  request: string | undefined;
  startedAt: number;
  endedAt: number | undefined;
  readonly children: string[];
}

const ENDED: ReadonlySet<NodeStatus> = new Set(['done', 'failed', 'cancelled', 'killed', 'crashed']);
const SPINNER = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/**
 * Follows the supervisor's events and renders the agents started since the
 * last `reset()` as a tree: a parent agent, its subagents under it (at any
 * depth), each with its status, the tool it runs and its time, then a line
 * for the pool. Times are in the base every thread shares (`sharedNow`,
 * the same as the events' `at`).
 */
export class AgentTree {
  readonly #nodes = new Map<string, TreeNode>();
  readonly #roots: string[] = [];
  readonly #supervisor: Supervisor;
  #frame = 0;
  /** A line under the pool (what the scene is doing), or none. */
  caption: string | undefined;

  constructor(supervisor: Supervisor) {
    this.#supervisor = supervisor;
    const s = supervisor;
    s.on('agent.started', (e) => this.#root(e.agentId, e.agent, e.at));
    s.on('agent.turn', (e) => this.#set(e.agentId, 'running', e.at));
    s.on('agent.done', (e) => this.#end(e.agentId, 'done', e.at));
    s.on('agent.failed', (e) => this.#end(e.agentId, 'failed', e.at, codeOf(e.error)));
    s.on('agent.cancelled', (e) => this.#end(e.agentId, 'cancelled', e.at, e.reason));
    s.on('agent.incomplete', (e) => this.#end(e.agentId, 'failed', e.at, 'turn limit'));
    s.on('subagent.spawned', (e) => {
      const node = this.#nodes.get(e.agentId);
      if (node !== undefined) {
        // A resumed run: the same child, busy again; its time is the resumed run's.
        node.status = 'queued';
        node.note = 'resumed';
        node.startedAt = e.at;
        node.endedAt = undefined;
        return;
      }
      this.#child(e.agentId, e.agent, e.parentAgentId, e.at);
    });
    s.on('model.start', (e) => this.#set(e.agentId, 'running', e.at));
    s.on('tool.execute.start', (e) => {
      const node = this.#set(e.agentId, 'running', e.at);
      if (node !== undefined) node.tool = e.toolName;
    });
    s.on('tool.execute.stop', (e) => {
      const node = this.#nodes.get(e.agentId);
      if (node !== undefined && node.tool === e.toolName) node.tool = undefined;
    });
    s.on('subagent.done', (e) => this.#end(e.agentId, 'done', e.at));
    s.on('subagent.failed', (e) => this.#end(e.agentId, 'failed', e.at, codeOf(e.error)));
    s.on('subagent.crashed', (e) => this.#end(e.agentId, 'crashed', e.at, `worker exit ${e.exitCode}`));
    s.on('subagent.cancelled', (e) =>
      this.#end(e.agentId, e.forced ? 'killed' : 'cancelled', e.at, e.forced ? 'worker killed' : e.reason),
    );
    s.on('subagent.suspended', (e) => {
      const node = this.#nodes.get(e.agentId);
      if (node !== undefined && node.status !== 'asking') {
        node.status = 'asking';
        node.tool = undefined;
      }
    });
    s.on('subagent.incomplete', (e) => this.#end(e.agentId, 'failed', e.at, 'turn limit'));
    s.on('request.opened', (e) => {
      // The run that asked is the last of the path (the event's agentId is its parent agent).
      const node = this.#nodes.get(e.path.at(-1) ?? e.agentId);
      if (node === undefined) return;
      node.status = 'asking';
      node.tool = undefined;
      node.note = e.request.kind;
      node.request = e.request.id;
      for (const id of e.path) {
        const up = this.#nodes.get(id);
        if (up !== undefined && up !== node && !ENDED.has(up.status)) up.status = 'waiting';
      }
    });
    s.on('request.answered', (e) => {
      for (const node of this.#nodes.values()) {
        if (node.status === 'asking' && node.request === e.requestId) {
          node.status = 'queued';
          node.note = e.ok ? 'answered' : 'declined';
        }
      }
    });
  }

  /** Forget the agents shown so far: the next scene starts an empty tree. */
  reset(caption?: string): void {
    this.#nodes.clear();
    this.#roots.length = 0;
    this.caption = caption;
  }

  /**
   * Show a run restored from the store (no event told of it): `path` from
   * its parent agent down to it, the last one asking `requestId`.
   */
  restored(path: readonly string[], names: readonly string[], requestId: string): void {
    const now = sharedNow();
    path.forEach((id, i) => {
      if (this.#nodes.has(id)) return;
      const name = names[i] ?? '';
      if (i === 0) this.#root(id, name, now);
      else this.#child(id, name, path[i - 1], now);
      const node = this.#nodes.get(id) as TreeNode;
      node.status = i === path.length - 1 ? 'asking' : 'waiting';
      node.note = i === path.length - 1 ? 'restored' : undefined;
      node.request = i === path.length - 1 ? requestId : undefined;
    });
  }

  #root(id: string, name: string, at: number): void {
    if (this.#nodes.has(id)) return;
    this.#nodes.set(id, node(id, name, undefined, 'waiting', at));
    this.#roots.push(id);
  }

  #child(id: string, name: string, parent: string | undefined, at: number): void {
    const up = parent === undefined ? undefined : this.#nodes.get(parent);
    if (up === undefined) return; // An agent of another scene.
    this.#nodes.set(id, node(id, name, parent, 'queued', at));
    up.children.push(id);
  }

  #set(id: string, status: NodeStatus, at: number): TreeNode | undefined {
    const n = this.#nodes.get(id);
    if (n === undefined) return undefined;
    if (ENDED.has(n.status) || n.status === 'waiting' || n.status === 'asking') {
      // A new message (a parent) or a resumed run starts its clock again.
      if (n.status !== 'waiting') n.startedAt = at;
      n.endedAt = undefined;
      if (n.note !== 'resumed' && n.note !== 'answered') n.note = undefined;
    }
    n.status = status;
    return n;
  }

  #end(id: string, status: NodeStatus, at: number, note?: string): void {
    const n = this.#nodes.get(id);
    if (n === undefined) return;
    n.status = status;
    n.endedAt = at;
    n.tool = undefined;
    n.note = note;
  }

  /** The status of an agent of this scene, if shown. */
  statusOf(id: string): NodeStatus | undefined {
    return this.#nodes.get(id)?.status;
  }

  /** The tree's lines, then the pool's; cut to the width by the output. */
  render(style: Style): string[] {
    if (this.#roots.length === 0) return this.caption === undefined ? [] : [`   ${style.dim(this.caption)}`];
    this.#frame++;
    const now = sharedNow();
    const lines: string[] = [];
    const walk = (id: string, prefix: string, last: boolean, depth: number): void => {
      const n = this.#nodes.get(id);
      if (n === undefined) return;
      const branch = depth === 0 ? '' : last ? '└─ ' : '├─ ';
      lines.push(this.#line(n, `${prefix}${branch}`, depth, now, style));
      const below = depth === 0 ? '' : `${prefix}${last ? '   ' : '│  '}`;
      n.children.forEach((c, i) => {
        walk(c, below, i === n.children.length - 1, depth + 1);
      });
    };
    for (const r of this.#roots) walk(r, '', true, 0);
    const p = this.#supervisor.stats();
    const q = p.pendingRequests;
    lines.push(
      style.dim(
        `pool: ${p.pool.threads} threads${p.pool.running === 0 && p.pool.threads > 0 ? ' (all free)' : ''} · ` +
          `${p.pool.running} runs active · ${p.pool.queued} queued · ${q} question${q === 1 ? '' : 's'} open`,
      ),
    );
    if (this.caption !== undefined) lines.push(style.dim(this.caption));
    return lines.map((l) => `   ${l}`);
  }

  #line(n: TreeNode, prefix: string, depth: number, now: number, style: Style): string {
    const icon = iconOf(n.status, this.#frame, style);
    const id = n.id.padEnd(Math.max(0, 16 - prefix.length));
    const name = n.name.padEnd(11);
    const doing = n.tool !== undefined ? `${n.status} ${n.tool}` : n.status;
    const what = n.note === undefined ? doing : `${doing} (${n.note})`;
    const time = formatDuration((n.endedAt ?? now) - n.startedAt).padStart(9);
    const body = `${id} ${style.dim(name)} ${paintStatus(what.padEnd(28), n.status, style)}`;
    return `${style.dim(prefix)}${icon} ${depth === 0 ? style.bold(body) : body}${style.dim(time)}`;
  }
}

function node(id: string, name: string, parent: string | undefined, status: NodeStatus, at: number): TreeNode {
  return {
    id,
    name,
    parent,
    status,
    tool: undefined,
    note: undefined,
    request: undefined,
    startedAt: at,
    endedAt: undefined,
    children: [],
  };
}

function codeOf(error: Error): string {
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' ? code : error.name;
}

function iconOf(status: NodeStatus, frame: number, style: Style): string {
  switch (status) {
    case 'queued':
      return style.dim('○');
    case 'running':
      return style.cyan(SPINNER[frame % SPINNER.length] as string);
    case 'asking':
      return style.yellow('?');
    case 'waiting':
      return style.dim('◌');
    case 'done':
      return style.green('✓');
    case 'cancelled':
      return style.yellow('⊘');
    case 'failed':
    case 'killed':
    case 'crashed':
      return style.red('✗');
  }
}

function paintStatus(text: string, status: NodeStatus, style: Style): string {
  switch (status) {
    case 'done':
      return style.green(text);
    case 'asking':
    case 'cancelled':
      return style.yellow(text);
    case 'failed':
    case 'killed':
    case 'crashed':
      return style.red(text);
    default:
      return text;
  }
}
