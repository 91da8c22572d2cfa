import { serialize } from 'node:v8';

/** The scope sizes the suite measures, by name, in v8-serialized bytes. */
export const SCOPE_SIZES = {
  lean: 200,
  '10k': 10 * 1024,
  '100k': 100 * 1024,
  '1m': 1024 * 1024,
} as const;

/** A scope size name (`lean`, `10k`, `100k`, `1m`). */
export type ScopeSize = keyof typeof SCOPE_SIZES;

/** The lean scope: who the agent acts for, nothing preloaded. */
export interface LeanUser {
  readonly userId: string;
  readonly orgId: string;
  readonly role: string;
  readonly teamIds: readonly string[];
  readonly locale: string;
  readonly plan: string;
}

/** A preloaded ORM user graph, the way an app's request scope often looks. */
export interface UserGraph {
  readonly user: Record<string, unknown>;
  readonly profile: Record<string, unknown>;
  readonly organization: Record<string, unknown>;
  readonly memberships: readonly Record<string, unknown>[];
  readonly preferences: Record<string, unknown>;
  readonly apiKeys: readonly Record<string, unknown>[];
  readonly auditEvents: readonly Record<string, unknown>[];
}

/** mulberry32: a tiny seeded PRNG, so every run measures the same graphs. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = [
  'alpha',
  'bravo',
  'cedar',
  'delta',
  'ember',
  'fjord',
  'gamma',
  'harbor',
  'indigo',
  'juniper',
  'kestrel',
  'lumen',
  'meadow',
  'nimbus',
  'orchid',
  'prairie',
];
const RESOURCES = ['project', 'issue', 'invoice', 'report', 'dataset', 'pipeline', 'secret', 'member'];
const ACTIONS = ['read', 'write', 'delete', 'admin', 'export', 'approve'];
const AUDIT = ['login', 'logout', 'key.created', 'member.invited', 'project.updated', 'export.started', 'role.changed'];
const BASE_TIME = Date.UTC(2024, 0, 1);

/**
 * `n` items, pushed one by one. Not `Array.from({ length: n }, fn)`: that
 * makes a holey array, which V8 serializes sparse (bigger), while a copy of it
 * (a worker's, or a supervisor's) is packed: sizes would differ by a few bytes.
 */
function times<T>(n: number, fn: () => T): T[] {
  const out: T[] = [];
  for (let i = 0; i < n; i++) out.push(fn());
  return out;
}

class Gen {
  readonly #rand: () => number;
  #serial = 0;
  constructor(seed: number) {
    this.#rand = prng(seed);
  }
  int(n: number): number {
    return Math.floor(this.#rand() * n);
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)] as T;
  }
  id(prefix: string): string {
    this.#serial++;
    return `${prefix}_${this.#serial.toString(36).padStart(6, '0')}${this.int(1e8).toString(36)}`;
  }
  words(n: number): string {
    return times(n, () => this.pick(WORDS)).join(' ');
  }
  time(): string {
    return new Date(BASE_TIME + this.int(365 * 24 * 3600) * 1000).toISOString();
  }
}

function membership(g: Gen, userId: string): Record<string, unknown> {
  const teamId = g.id('team');
  return {
    id: g.id('mem'),
    userId,
    teamId,
    role: g.pick(['owner', 'maintainer', 'member', 'viewer']),
    joinedAt: g.time(),
    team: { id: teamId, name: g.words(2), slug: g.words(1), description: g.words(8), createdAt: g.time() },
    permissions: times(4 + g.int(5), () => ({
      id: g.id('perm'),
      resource: g.pick(RESOURCES),
      action: g.pick(ACTIONS),
      granted: g.int(10) > 1,
      conditions: { ownOnly: g.int(2) === 1, mfa: g.int(2) === 1 },
    })),
  };
}

function auditEvent(g: Gen, userId: string): Record<string, unknown> {
  return {
    id: g.id('evt'),
    at: g.time(),
    action: g.pick(AUDIT),
    actorId: userId,
    target: { type: g.pick(RESOURCES), id: g.id('obj') },
    ip: `10.${g.int(256)}.${g.int(256)}.${g.int(256)}`,
    userAgent: `Mozilla/5.0 (${g.pick(['X11; Linux x86_64', 'Macintosh', 'Windows NT 10.0'])}) troupe/${g.int(9)}.${g.int(9)}`,
    metadata: { requestId: g.id('req'), durationMs: g.int(900), note: g.words(3) },
  };
}

function apiKey(g: Gen): Record<string, unknown> {
  return {
    id: g.id('key'),
    name: g.words(2),
    prefix: `tk_${g.int(1e9).toString(36)}`,
    createdAt: g.time(),
    lastUsedAt: g.time(),
    scopes: [g.pick(RESOURCES), g.pick(RESOURCES)].map((r) => `${r}:${g.pick(ACTIONS)}`),
  };
}

function build(seed: number, units: number): UserGraph {
  const g = new Gen(seed);
  const userId = g.id('usr');
  const orgId = g.id('org');
  // Audit events grow with the size; memberships (with their teams and permissions) grow as its square root,
  // as a real user's do, which keeps the ids-and-role projection lean at every size.
  const memberships = Math.max(1, Math.round(Math.sqrt(units) / 2));
  const events = Math.max(1, units - memberships);
  return {
    user: {
      id: userId,
      email: `${g.words(1)}.${g.words(1)}@example.com`,
      name: g.words(2),
      role: 'admin',
      status: 'active',
      locale: 'en-GB',
      timezone: 'Europe/London',
      createdAt: g.time(),
      updatedAt: g.time(),
      mfaEnabled: true,
    },
    profile: {
      displayName: g.words(2),
      bio: g.words(20),
      avatarUrl: `https://cdn.example.com/avatars/${userId}.png`,
      phone: `+44 20 ${g.int(1e4)} ${g.int(1e4)}`,
      address: { line1: g.words(3), city: g.words(1), postcode: `N${g.int(20)} ${g.int(9)}AB`, country: 'GB' },
      social: { github: g.words(1), linkedin: g.words(1) },
    },
    organization: {
      id: orgId,
      name: g.words(2),
      slug: g.words(1),
      plan: 'enterprise',
      createdAt: g.time(),
      settings: { sso: true, retentionDays: 365, allowedDomains: ['example.com', 'example.org'] },
      billing: { customerId: g.id('cus'), currency: 'EUR', seats: 40 + g.int(400) },
    },
    memberships: times(memberships, () => membership(g, userId)),
    preferences: {
      theme: 'dark',
      notifications: { email: true, push: false, digest: 'weekly' },
      shortcuts: { search: 'mod+k', newIssue: 'c' },
      recentSearches: times(5, () => g.words(2)),
    },
    apiKeys: times(2 + Math.floor(units / 40), () => apiKey(g)),
    auditEvents: times(events, () => auditEvent(g, userId)),
  };
}

/** v8-serialized size: what a thread hop copies. */
export function serializedBytes(value: unknown): number {
  return serialize(value).byteLength;
}

/**
 * A seeded, preloaded ORM-like user graph (profile, organization,
 * memberships with teams and permissions, preferences, API keys, audit
 * events) whose v8-serialized size is the smallest at or above `targetBytes`.
 * The same seed and target always give the same graph.
 */
export function generateUserGraph(targetBytes: number, seed = 6): UserGraph {
  if (!Number.isSafeInteger(targetBytes) || targetBytes < 1) throw new RangeError('targetBytes must be positive');
  // Sizes grow about linearly with the unit count: estimate it from two small
  // builds, step up until at or above the target, then bisect down to the
  // smallest such count (a few builds of the big graph, not a dozen).
  const size = (units: number): number => serializedBytes(build(seed, units));
  const one = size(1);
  if (one >= targetBytes) return build(seed, 1);
  const perUnit = Math.max(1, (size(32) - one) / 31);
  let lo = 1;
  let hi = Math.max(2, 1 + Math.ceil((targetBytes - one) / perUnit));
  for (let at = size(hi); at < targetBytes; at = size(hi)) {
    lo = hi;
    hi += Math.max(1, Math.ceil((targetBytes - at) / perUnit));
  }
  while (hi - lo > 1) {
    const mid = (lo + hi) >>> 1;
    if (size(mid) < targetBytes) lo = mid;
    else hi = mid;
  }
  return build(seed, hi);
}

/** The lean scope the suite calls `lean` (~200 B): ids, role and two settings. */
export function generateLeanUser(seed = 6): LeanUser {
  const g = new Gen(seed);
  return {
    userId: g.id('usr'),
    orgId: g.id('org'),
    role: 'admin',
    teamIds: [g.id('team'), g.id('team'), g.id('team')],
    locale: 'en-GB',
    plan: 'enterprise',
  };
}

/** The projection sagents advises: the heavy user's ids and role only. */
export function leanProjection(graph: UserGraph): {
  readonly userId: string;
  readonly orgId: string;
  readonly role: string;
  readonly teamIds: readonly string[];
} {
  return {
    userId: graph.user.id as string,
    orgId: graph.organization.id as string,
    role: graph.user.role as string,
    teamIds: graph.memberships.map((m) => m.teamId as string),
  };
}

/** The scope of a named size: lean, or the user graph of that size. */
export function scopeOfSize(size: ScopeSize): LeanUser | UserGraph {
  return size === 'lean' ? generateLeanUser() : generateUserGraph(SCOPE_SIZES[size]);
}
