import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Chart } from './Suite.js';

/**
 * Render Vega-Lite charts to SVG files in `dir`, headless (Vega's `renderer:
 * 'none'` view; no canvas, no browser). Returns the paths written. Vega is
 * imported on first use: a run without charts does not pay for it.
 */
export async function renderCharts(charts: readonly Chart[], dir: string): Promise<string[]> {
  if (charts.length === 0) return [];
  const [vega, vegaLite] = await Promise.all([import('vega'), import('vega-lite')]);
  mkdirSync(dir, { recursive: true });
  const written: string[] = [];
  for (const chart of charts) {
    const view = new vega.View(vega.parse(vegaLite.compile(chart.spec).spec), { renderer: 'none' });
    try {
      const svg = await view.toSVG();
      const file = join(dir, `${chart.name}.svg`);
      writeFileSync(file, `${svg}\n`);
      written.push(file);
    } finally {
      view.finalize();
    }
  }
  return written;
}
