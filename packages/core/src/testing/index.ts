/**
 * Test doubles for Troupe: a clock that moves only when told and a scripted
 * model. Import from `@troupe/core/testing`.
 */
export { ManualClock } from './ManualClock.js';
export {
  ScriptedModel,
  type ScriptedModelOptions,
  type ScriptedReply,
  type ScriptInput,
  type ScriptStep,
} from './ScriptedModel.js';
