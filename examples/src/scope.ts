import { defineScope } from '@troupe/core';
import { z } from 'zod';

/**
 * Who the example agents act for. Parsed at the edge by the supervisor,
 * deep-frozen, and copied to every subagent, so it holds ids and a role — not
 * the user's record, and not a preloaded permission graph.
 */
export const TenantScope = defineScope(
  z.object({
    tenantId: z.string().min(1),
    userId: z.string().min(1),
    role: z.enum(['viewer', 'oncall', 'admin']),
    permissions: z.array(z.string()),
  }),
);
