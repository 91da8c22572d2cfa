// Baseline task of the `scope` suite: a raw piscina round trip carrying the
// same payload as a subagent task, and nothing else.
export default function piscinaTask(_task: { readonly scope: unknown }): string {
  return 'ok';
}
