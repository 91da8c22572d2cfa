// The piscina worker entry (`@troupe/subagent/worker`): one task = one subagent run.
import { runSubagentTask } from './runSubagentTask.js';

export default runSubagentTask;
