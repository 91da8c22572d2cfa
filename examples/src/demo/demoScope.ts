/** Who the demo's agents act for: a lean scope (ids and a role), parsed by `TenantScope`. */
export const demoScope = {
  tenantId: 'acme',
  userId: 'u-42',
  role: 'oncall',
  permissions: ['deploy:checkout-api', 'refund:<=100'],
} as const;
