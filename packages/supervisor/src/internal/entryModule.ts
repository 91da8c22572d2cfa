import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

let entry: string | null | undefined;

/**
 * Whether `url` is the script Node was started with (`node script.mjs`). A
 * one-file program defines its agents there (`module: import.meta.url`) and
 * awaits the supervisor at its top level: importing that module again on
 * the main thread would wait for the script's own top-level `await` — of
 * the very call doing the import — and never settle. Node runs the entry
 * from its real path, so that is what `import.meta.url` names.
 */
export function isEntryModule(url: string): boolean {
  if (entry === undefined) {
    const main = process.argv[1];
    try {
      entry = main === undefined ? null : pathToFileURL(realpathSync(main)).href;
    } catch {
      entry = null;
    }
  }
  return entry === url;
}
