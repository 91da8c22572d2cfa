// The piscina worker entry; filled in by the subagent runtime.
export default async function run(task: unknown): Promise<unknown> {
  return task;
}
