// A piscina task that runs the peers suite's CPU loop: the fan-out's raw two-thread baseline.
import { burn } from '../peers/burn.js';

export default function burnTask({ n }: { n: number }): number {
  return burn(n);
}
