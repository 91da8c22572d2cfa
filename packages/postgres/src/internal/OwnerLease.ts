import { hostname } from 'node:os';
import type pg from 'pg';
import type { Statements } from './statements.js';

/**
 * This store's claim to be alive: a row of `owners` whose `lease_until` is renewed on the database
 * clock every third of the lease. A run another store finds `running` under an owner whose lease
 * has run out (its host died, or lost the database for longer than the lease) is interrupted there
 * and taken over; a row whose lease ran out long ago is dropped by whoever looks. A renewal that
 * finds its row dropped writes it again: the host is alive, its runs are its own again from then
 * on (those interrupted meanwhile stay so, and its next write of one is fenced once another host
 * resumed it).
 */
export class OwnerLease {
  readonly ownerId: string;
  readonly #pool: pg.Pool;
  readonly #sql: Statements;
  readonly #leaseMs: number;
  #timer: NodeJS.Timeout | undefined;
  #renewing: Promise<void> | undefined;

  constructor(pool: pg.Pool, sql: Statements, ownerId: string, leaseMs: number) {
    this.#pool = pool;
    this.#sql = sql;
    this.ownerId = ownerId;
    this.#leaseMs = leaseMs;
  }

  /** Write the owner row (rejects with what pg threw: a read-only role, a server that is gone). */
  async register(): Promise<void> {
    await this.#insert();
    this.#timer = setInterval(() => this.#renew(), Math.max(100, Math.floor(this.#leaseMs / 3)));
    this.#timer.unref();
  }

  #renew(): void {
    if (this.#renewing !== undefined) return; // the last one is still waiting on the server
    this.#renewing = (async () => {
      try {
        const renewed = await this.#pool.query(this.#sql.renewOwner, [this.ownerId, this.#leaseMs]);
        if (renewed.rowCount === 0) await this.#insert();
      } catch {
        // The server is unreachable: the next tick tries again; past the lease, other hosts take over.
      } finally {
        this.#renewing = undefined;
      }
    })();
  }

  // The row again, without a second timer.
  async #insert(): Promise<void> {
    await this.#pool.query(this.#sql.addOwner, [this.ownerId, hostname(), process.pid, this.#leaseMs]);
  }

  /** Stop renewing and drop the row (best effort: a row left behind runs out with its lease). */
  async release(): Promise<void> {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#renewing;
    try {
      await this.#pool.query(this.#sql.dropOwner, [this.ownerId]);
    } catch {
      // Unreachable: the lease runs out by itself.
    }
  }
}
