import type { CancelReason, TimerHandle } from '@troupe/core';
import type { Attempt, AttemptEnd, AttemptHandle } from '@troupe/supervisor';
import type { HostLookup, HostPeer } from '@troupe/supervisor/internal';
import type { RelayedAttempt } from './RelayServer.js';

// An attempt as the API host that owns it holds it, from dispatch to its end.

/** Where an attempt is, on its owner. */
export type Phase =
  /** Waiting on this API host for its tenant's cap (not in Redis yet). */
  | 'held'
  /** Its job is in the queue (or a host took it and claims it). */
  | 'queued'
  /** A host claimed it and was granted it. */
  | 'granted'
  | 'ended';

export interface OwnedAttempt {
  readonly attempt: Attempt;
  /** Its current job (`<runId>.<attempt>`, then `.<leg>` for each time it was queued again). */
  jobId: string;
  /** The current job's one-time nonce. */
  nonce: string;
  /** The capability its current grant carries (the tree's for its first leg, a fresh one after). */
  capability: string;
  /** How many times it was queued (1, then one more each time it ran again before any tool started). */
  legs: number;
  /** How many times its job ended with no grant (claims denied or given up): its next job waits longer. */
  bounces: number;
  /**
   * Who may run it again when its host vanishes: `tree` (the tree checkpoints it and runs it again
   * as attempt + 1), or this transport while no tool of it has started (`open`: it asks its worker
   * for a checkpoint before every tool call and answers it here; `closed` once it answered one).
   */
  gate: 'tree' | 'open' | 'closed';
  /** What the host channel's lookup answers for its current leg (one per grant). */
  found: HostLookup | undefined;
  readonly tenant: string | undefined;
  readonly handle: AttemptHandle;
  readonly resolve: (end: AttemptEnd) => void;
  readonly since: number;
  phase: Phase;
  hostId: string | undefined;
  relay: RelayedAttempt | undefined;
  /** Its relay as a peer of the host channel (from its grant on). */
  peer: RelayPeer | undefined;
  cancelled: CancelReason | undefined;
  placed: boolean;
  backstop: TimerHandle | undefined;
}

/**
 * A granted attempt's relay, as a peer of the host channel: the channel keeps its
 * flood window and its refusals; recycling it fences the attempt.
 */
export interface RelayPeer extends HostPeer {
  readonly host: string;
  readonly attempt: OwnedAttempt;
}

/** Hosts seen in the last lease scan: their slots. */
export interface HostSeen {
  readonly slots: number;
  readonly build: string;
}

/** The tenant an attempt counts against (`tenantOf` of its scope); a `tenantOf` that throws is one tenant of its own. */
export function safeTenant(tenantOf: (scope: never) => string, attempt: Attempt): string {
  try {
    return String(tenantOf(attempt.scope as never));
  } catch {
    return '(tenantOf threw)';
  }
}

// Compares every character whatever the first difference (no early exit), without allocating:
// it runs for every relayed message.
export function sameSecret(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}
