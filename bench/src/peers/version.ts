import { readFileSync } from 'node:fs';

/** `name@version` of a package installed for the bench (read from bench/node_modules). */
export function installedVersion(name: string): string {
  const file = new URL(`../../node_modules/${name}/package.json`, import.meta.url);
  const { version } = JSON.parse(readFileSync(file, 'utf8')) as { version: string };
  return `${name}@${version}`;
}
