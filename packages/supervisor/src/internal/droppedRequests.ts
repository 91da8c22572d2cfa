import type { EventEmitter } from 'eventemitter3';
import { MemoryPersistence } from '../persistence/MemoryPersistence.js';
import type { PersistenceAdapter } from '../persistence/Persistence.js';
import type { SupervisorEvents } from '../SupervisorEvents.js';

/** The warning's code (`process.on('warning', (w) => w.code === ...)`). */
export const REQUESTS_DROPPED_WARNING = 'TROUPE_REQUESTS_DROPPED';

/**
 * A supervisor is closing with `store` (`undefined`: none): the open questions
 * that go with it — the ones it holds (`held`) and those the in-memory store
 * keeps for conversations it no longer holds — are reported, never dropped
 * without a word: `requests.dropped`, or a process warning when nobody
 * listens. A durable store (or any other) keeps them: nothing is reported.
 */
export function reportDroppedRequests(
  events: EventEmitter<SupervisorEvents>,
  store: PersistenceAdapter | undefined,
  held: readonly string[],
  at: number,
): void {
  if (store !== undefined && !(store instanceof MemoryPersistence)) return;
  const ids = [...new Set([...held, ...(store?.openRequestIds() ?? [])])];
  if (ids.length === 0) return;
  const shown = ids.length > 5 ? `${ids.slice(0, 5).join(', ')} and ${ids.length - 5} more` : ids.join(', ');
  const where =
    store === undefined
      ? 'this supervisor saves nothing (persistence: null), so they lived only in its memory'
      : 'the in-memory store (MemoryPersistence, the default) keeps them only while the supervisor is open';
  const message = `the supervisor closed with ${ids.length} open question${ids.length === 1 ? '' : 's'} (${shown}), now dropped: ${where}. To answer questions after close() or a restart, keep them in a durable store — createSupervisor({ persistence: sqlitePersistence({ file }) }) from @troupe/sqlite (or postgresPersistence from @troupe/postgres) — or answer or cancel them before close(). Listen to the supervisor's 'requests.dropped' event to handle this yourself (no warning is printed then)`;
  const event = { requestIds: ids, message, at };
  if (events.listenerCount('requests.dropped') > 0) events.emit('requests.dropped', event);
  else process.emitWarning(message, { type: 'TroupeWarning', code: REQUESTS_DROPPED_WARNING });
}
