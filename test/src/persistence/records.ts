// The persistence contract's records and helpers, from `@troupe/supervisor/testing`, by name (the
// store tests of this folder build the same records the contract saves).
import { PersistenceFixtures } from '@troupe/supervisor/testing';

export type { MakeStore, StoreUnderTest, TestScope } from '@troupe/supervisor/testing';
export const { tenantKey, scopeOf, ctx, loopState, envelope, run, call, request, rejectsWith, withStore } =
  PersistenceFixtures;
