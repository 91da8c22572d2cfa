// The file piscina loads in each worker. CommonJS on purpose: piscina first
// `require`s its task file, and on Node 20.19+ requiring an ES module goes
// through require(esm), which can abort the process ("Assertion failed:
// facade->InstantiateModule", seen when a worker is terminated while it
// boots). This file is plain CommonJS; it imports the ES module runtime, and
// piscina awaits `default` (a promise of the task function) when the export
// is not a function itself (`__esModule` keeps its `__importStar` from
// wrapping the exports in another `default`).
export = { __esModule: true, default: import('./worker.js').then((m) => m.default) };
