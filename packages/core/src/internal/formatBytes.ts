/** A size for people: `200 B`, `1.5 KiB`, `18 KiB`, `1.25 MiB`. */
export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1).replace(/\.0$/, '')} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(2)} MiB`;
}
