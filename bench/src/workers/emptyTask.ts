// The baseline of the subagent suite: a raw piscina task that does nothing.
export default function emptyTask(task: unknown): unknown {
  return task;
}
