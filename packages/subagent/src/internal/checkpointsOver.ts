import { HostOp, type TurnCheckpoints } from '@troupe/core/internal';
import type { HostLink } from './HostLink.js';

/**
 * A run's turn checkpoints, saved by the supervisor through its host
 * channel. The loop awaits each one; each presents the receipt the one
 * before it was answered with (the supervisor refuses a checkpoint sent
 * before the last one was answered: it could not carry that receipt).
 */
export function checkpointsOver(host: HostLink): TurnCheckpoints {
  let receipt: string | undefined;
  const save = async (payload: Record<string, unknown>): Promise<void> => {
    const reply = await host.call(HostOp.checkpoint, receipt === undefined ? payload : { ...payload, receipt });
    receipt = typeof reply === 'string' ? reply : undefined;
  };
  return {
    beforeCalls: (state, calls) => save({ phase: 'before', state, calls }),
    afterTurn: (state, calls) =>
      save({ phase: 'after', state, calls: calls.map((id) => ({ id, name: '', idempotent: false })) }),
  };
}
