import type { TopLevelSpec } from 'vega-lite';
import type { Chart, Figure } from '../Suite.js';

interface Row {
  readonly placement: string;
  readonly series: string;
  readonly x: number;
  readonly us: number;
}

const SIZES = ['lean', '10k', '100k', '1m'] as const;

/** Lines (with points) of `us` over `x`, one colour per series, one panel per placement; log-log unless `xLog` is false. */
function lines(title: string, rows: readonly Row[], x: { title: string; log: boolean }, yTitle: string): TopLevelSpec {
  const series = [...new Set(rows.map((r) => r.series))];
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: { text: title, anchor: 'start' },
    data: { values: rows as Row[] },
    facet: { column: { field: 'placement', type: 'nominal', title: null, sort: ['unpinned', 'pinned'] } },
    spec: {
      width: 340,
      height: 260,
      mark: { type: 'line', point: true, strokeWidth: 1.5 },
      encoding: {
        x: {
          field: 'x',
          type: 'quantitative',
          title: x.title,
          scale: x.log ? { type: 'log' } : { type: 'log', base: 2 },
          axis: x.log ? { format: '~s' } : { values: [1, 2, 4, 8] },
        },
        y: { field: 'us', type: 'quantitative', title: yTitle, scale: { type: 'log' }, axis: { format: ',~r' } },
        color: {
          field: 'series',
          type: 'nominal',
          title: null,
          sort: series,
          legend: { orient: 'bottom', columns: 2, labelLimit: 320 },
        },
      },
    },
    config: { font: 'sans-serif' },
  };
}

/**
 * The scope suite's charts, from the figures of one run (both placements):
 * per-hop cost against size with the same-run baselines, per-hop cost against
 * the number of hops, supervisor-thread time per hop, the lean projection,
 * and the shared-scope stretch.
 */
export function scopeCharts(figures: readonly Figure[]): Chart[] {
  const scope = figures.filter((f) => f.suite === 'scope');
  if (!scope.some((f) => f.name === 'scope.hop_us.lean')) return [];
  const find = (name: string, placement: string | undefined) =>
    scope.find((f) => f.name === name && (f.placement ?? 'unpinned') === placement);
  const placements = [...new Set(scope.map((f) => f.placement ?? 'unpinned'))];
  const bytesOf = (f: Figure | undefined): number => Number(f?.detail?.bytes ?? Number.NaN);

  const vsSize: Row[] = [];
  const byHops: Row[] = [];
  const mainThread: Row[] = [];
  const projection: Row[] = [];
  const shared: Row[] = [];
  for (const placement of placements) {
    const push = (rows: Row[], series: string, name: string, x?: number) => {
      const f = find(name, placement);
      if (f !== undefined && Number.isFinite(f.value) && f.value > 0) {
        rows.push({ placement, series, x: x ?? bytesOf(f), us: f.value });
      }
    };
    for (const size of SIZES) {
      push(vsSize, 'Troupe, 1 hop (spawn)', `scope.hop_us.${size}`);
      push(
        vsSize,
        'Troupe, per hop of an 8-hop chain',
        `scope.hop_us.${size}.h8`,
        bytesOf(find(`scope.hop_us.${size}`, placement)),
      );
      push(vsSize, 'piscina round trip', `scope.piscina_rtt_us.${size}`);
      push(vsSize, 'postMessage round trip', `scope.postmessage_rtt_us.${size}`);
      push(vsSize, 'structuredClone', `scope.clone_us.${size}`);
      push(vsSize, 'Buffer.copy (memcpy)', `scope.memcpy_us.${size}`);
    }
    for (const key of [...SIZES, 'projection']) {
      for (const hops of [1, 2, 4, 8]) {
        const name = hops === 1 ? `scope.hop_us.${key}` : `scope.hop_us.${key}.h${hops}`;
        const label = key === 'projection' ? '1 MiB user, ids-and-role projection' : key;
        push(byHops, label, name, hops);
        const f = find(name, placement);
        const main = Number(f?.detail?.main_us);
        if (f !== undefined && key !== 'projection' && main > 0) {
          mainThread.push({ placement, series: `${hops} hop(s)`, x: bytesOf(f), us: main });
        }
        if (key === '1m' || key === 'projection') {
          push(projection, key === '1m' ? '1 MiB user graph' : 'its ids-and-role projection', name, hops);
        }
      }
    }
    for (const f of scope.filter((g) => (g.placement ?? 'unpinned') === placement)) {
      if (f.name.startsWith('scope.copy_onekey_hop_us.')) {
        shared.push({ placement, series: 'copied scope', x: bytesOf(f), us: f.value });
      } else if (f.name.startsWith('scope.shared_onekey_hop_us.')) {
        const x = bytesOf(f);
        shared.push({ placement, series: 'shared: fresh version, first decode', x, us: f.value });
        const withEncode = Number(f.detail?.cold_with_encode_us);
        if (withEncode > 0) shared.push({ placement, series: 'shared: fresh version + encode', x, us: withEncode });
        const warm = Number(f.detail?.warm_us);
        if (warm > 0) shared.push({ placement, series: 'shared: cached version', x, us: warm });
      }
    }
  }
  const size = { title: 'scope size (v8-serialized bytes)', log: true };
  const hopAxis = { title: 'hops in the chain', log: false };
  return [
    {
      name: 'scope-hop-vs-size',
      spec: lines('Scope copy: time per subagent hop vs same-run baselines', vsSize, size, 'µs (median)'),
    },
    { name: 'scope-hops', spec: lines('Time per hop by chain length', byHops, hopAxis, 'µs per hop (median)') },
    {
      name: 'scope-main-thread',
      spec: lines('Supervisor-thread busy time per hop', mainThread, size, 'µs per hop (median)'),
    },
    {
      name: 'scope-projection',
      spec: lines('What a lean projection buys (1 MiB user)', projection, hopAxis, 'µs per hop (median)'),
    },
    {
      name: 'scope-shared',
      spec: lines('Stretch: one-key read over one hop, copied vs shared scope', shared, size, 'µs (median)'),
    },
  ];
}
