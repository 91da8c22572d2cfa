import { isTroupeError, serializedSize } from '@troupe/core';
import { coordinator } from '../../agents/coordinator.js';
import { TenantScope } from '../../scope.js';
import { demoScope } from '../demoScope.js';
import { formatBytes, type Narrator } from '../Narrator.js';
import type { Stage } from '../Stage.js';
import { fig } from '../wrapText.js';

/** The scope is checked at the edge: parsed, frozen, within its budget, or refused before anything runs. */
export async function scopeAtEdge(stage: Stage): Promise<void> {
  const tour: Narrator = stage.tour;
  const { supervisor } = stage;
  stage.begin('7. Scope: who the agents act for, checked at the edge');
  const lean = TenantScope.parse(demoScope);
  const heavy = {
    ...demoScope,
    permissions: Array.from({ length: 400 }, (_, i) => `repo:acme/service-${i}:write`),
  };
  const before = supervisor.stats();
  let refused: unknown;
  try {
    await supervisor.startAgent(coordinator, {
      scope: heavy,
      conversationId: stage.run,
      toolContext: { requestId: 'req-heavy' },
    });
  } catch (error) {
    refused = error;
  }
  const after = supervisor.stats();
  await stage.showTree();
  tour.check(
    Object.isFrozen(lean) && Object.isFrozen(lean.permissions),
    `lean scope {tenantId, userId, role, permissions[2]} parsed by zod, deep-frozen, ${fig(formatBytes(serializedSize(lean)))} of the ${formatBytes(TenantScope.budgetBytes)} budget`,
  );
  tour.check(
    isTroupeError(refused, 'ERR_SCOPE_OVER_BUDGET') &&
      after.agents === before.agents &&
      after.pool.completed === before.pool.completed,
    'heavy scope (400 permissions preloaded) refused before anything was spawned: ERR_SCOPE_OVER_BUDGET',
    refused,
  );
  tour.note(`"${(refused as Error).message}"`);
  await stage.end();
}
