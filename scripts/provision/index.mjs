// The project's own set-up, run by the root `postinstall` (`pnpm install`):
// what the tests, the demos and the benchmarks need on the machine besides
// Node.js and the npm packages. A plain list of calls, one per service; each
// one says what it did, and what to run when it cannot do it itself.
import { provisionPostgres } from './postgres.mjs';
import { provisionRedis } from './redis.mjs';

await provisionRedis();
provisionPostgres();
