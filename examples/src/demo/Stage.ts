import type { Supervisor } from '@troupe/supervisor';
import type { AgentTree } from './AgentTree.js';
import type { Narrator } from './Narrator.js';
import type { Output } from './Output.js';
import type { Person } from './Person.js';

/** Everything a scene uses: the supervisor, the screen, the person, this run's ids. */
export interface StageParts {
  readonly supervisor: Supervisor;
  readonly tour: Narrator;
  readonly out: Output;
  readonly tree: AgentTree;
  readonly person: Person;
  readonly dir: string;
  readonly file: string;
  /** True when the database was there before this run. */
  readonly existed: boolean;
  /** This run's conversation id: the scenes' agents are saved under it (and deleted at the end). */
  readonly run: string;
  /** Pool threads. */
  readonly threads: number;
}

// A moment to read a scene's last lines before the next begins (on a terminal only).
const SCENE_PAUSE_MS = 500;

/**
 * The scenes' common ground. A scene opens with `begin` (its title; the
 * tree of its agents goes live), shows the tree for good with `showTree`
 * once its agents are done, and closes with `end` (what is printed has been
 * read: a pause on a terminal, none in plain mode).
 */
export class Stage implements StageParts {
  readonly supervisor: Supervisor;
  readonly tour: Narrator;
  readonly out: Output;
  readonly tree: AgentTree;
  readonly person: Person;
  readonly dir: string;
  readonly file: string;
  readonly existed: boolean;
  readonly run: string;
  readonly threads: number;

  constructor(parts: StageParts) {
    this.supervisor = parts.supervisor;
    this.tour = parts.tour;
    this.out = parts.out;
    this.tree = parts.tree;
    this.person = parts.person;
    this.dir = parts.dir;
    this.file = parts.file;
    this.existed = parts.existed;
    this.run = parts.run;
    this.threads = parts.threads;
  }

  begin(title: string, caption?: string): void {
    this.tour.scene(title);
    this.tree.reset(caption);
    this.out.follow(() => this.tree.render(this.out.style));
  }

  /** Let what is queued print, then the tree as it is now, for good. */
  async showTree(): Promise<void> {
    await this.out.drain();
    this.out.commit();
  }

  async end(): Promise<void> {
    await this.showTree();
    await this.out.drain();
    await this.out.pause(SCENE_PAUSE_MS);
  }

  /** Start following the tree again after `showTree` (a scene in several acts). */
  follow(caption?: string): void {
    this.tree.caption = caption;
    this.out.follow(() => this.tree.render(this.out.style));
  }
}
