// Type tests of the scope and the tool context (issue 16, item 2). The
// `@ts-expect-error` lines below must fail to compile: should one of them stop
// being an error, `tsc -b` (the first step of `pnpm test`) fails with TS2578
// ("Unused '@ts-expect-error' directive"). Each is a one-line twin of a line
// that compiles, so the error is the value's, not a typo's. The `Equal`
// checks fail to compile when an inferred type changes. The functions holding
// them are never called; the tests at the end run the typed program.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type Agent, defineAgent, defineScope, defineTool, type ScopeOf, type ToolContext } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import { type PostgresPersistence, postgresPersistence } from '@troupe/postgres';
import { sqlitePersistence } from '@troupe/sqlite';
import { createSupervisor, MemoryPersistence, type Supervisor, type TenantKey } from '@troupe/supervisor';
import { z } from 'zod';

/** True when A and B are the same type (not merely assignable either way). */
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
/** Compiles only for `true`. */
const expectType = <T extends true>(): T => true as T;

const TenantScope = defineScope(z.object({ tenantId: z.string(), userId: z.string() }));
type TenantScope = ScopeOf<typeof TenantScope>;
/** What the order tools read: the tenant scope and a request id from the host. */
type OrderContext = ToolContext<TenantScope, { requestId: string }>;

const model = () =>
  new ScriptedModel([
    { toolCalls: [{ name: 'who', arguments: {} }] },
    ({ lastToolResults }) => String(lastToolResults[0]?.content),
  ]);

const who = defineTool({
  name: 'who',
  description: 'Say who the run is for',
  parameters: z.object({}),
  execute: (_args, ctx: OrderContext) => `${ctx.scope.tenantId}/${ctx.scope.userId} ${ctx.requestId}`,
});

/** A parent agent (its tools run on the supervisor thread) that needs the tenant scope and a request id. */
const orders = defineAgent({ name: 'orders', instructions: 'Say who.', tools: [who], model: model() });

/** Reads only the tenant; declares no toolContext. */
const tenantOnly = defineTool({
  name: 'who',
  description: 'Say which tenant',
  parameters: z.object({}),
  execute: (_args, ctx: ToolContext<{ tenantId: string }>) => ctx.scope.tenantId,
});

/** Reads a key the tenant scope does not have. */
const orgReader = defineTool({
  name: 'org',
  description: 'Say which organisation',
  parameters: z.object({}),
  execute: (_args, ctx: ToolContext<{ orgId: string }>) => ctx.scope.orgId,
});

export function toolContextTypes(): void {
  defineTool({
    name: 'typed',
    description: 'reads the typed context',
    parameters: z.object({ n: z.number() }),
    execute: ({ n }, ctx: OrderContext) => {
      expectType<Equal<TenantScope, { tenantId: string; userId: string }>>();
      expectType<Equal<typeof ctx.scope.tenantId, string>>();
      expectType<Equal<typeof ctx.requestId, string>>();
      expectType<Equal<typeof ctx.toolContext.requestId, string>>();
      const tenant: string = ctx.scope.tenantId;
      // @ts-expect-error the scope has no orgId
      const org = ctx.scope.orgId;
      const request: string = ctx.requestId;
      // @ts-expect-error requestId is a string, not a number
      const wrong: number = ctx.requestId;
      // @ts-expect-error the scope is deep-frozen: read-only
      ctx.scope.tenantId = 'other';
      // @ts-expect-error reserved keys win: the scope is the scope, whatever a toolContext holds
      const reserved: string = (ctx as ToolContext<TenantScope, { scope: string }>).scope;
      return [n, tenant, org, request, wrong, reserved].join();
    },
  });
  defineTool({
    name: 'untyped',
    description: 'declares nothing',
    parameters: z.object({}),
    execute: (_args, ctx) => {
      expectType<Equal<typeof ctx.scope, unknown>>();
      // @ts-expect-error an undeclared scope is unknown: declare what the tool reads
      const tenant = ctx.scope.tenantId;
      // @ts-expect-error an undeclared toolContext key cannot be read
      const request = ctx.requestId;
      return [tenant, request].join();
    },
  });
}

export function agentTypes(): void {
  // An agent needs what all its tools and subagents read, intersected (and has no structured output: `undefined`).
  const both = defineAgent({ name: 'both', instructions: '', tools: [tenantOnly, orgReader], model: model() });
  expectType<Equal<typeof both, Agent<{ tenantId: string } & { orgId: string }, Record<never, never>, undefined>>>();
  const parent = defineAgent({ name: 'parent', instructions: '', subagents: [orders], model: model() });
  expectType<Equal<typeof parent, Agent<TenantScope, { requestId: string }, undefined>>>();
  const bare = defineAgent({ name: 'bare', instructions: '', model: model() });
  expectType<Equal<typeof bare, Agent<unknown, Record<never, never>, undefined>>>();
  // Held to a declared shape: an agent whose tools read more does not compile.
  const declared: Agent<TenantScope, { requestId: string }> = orders;
  // @ts-expect-error its tools read requestId, which this shape does not provide
  const tooLittle: Agent<TenantScope, Record<never, never>> = orders;
  const every: readonly Agent[] = [orders, both, parent, bare, declared, tooLittle];
  assert.ok(every);
}

export async function supervisorTypes(supervisor: Supervisor<TenantScope>): Promise<void> {
  const scope = { tenantId: 'acme', userId: 'u-1' };
  const toolContext = { requestId: 'req-1' };
  await supervisor.startAgent(orders, { scope, toolContext });
  // @ts-expect-error the scope misses userId, which the schema requires
  await supervisor.startAgent(orders, { scope: { tenantId: 'acme' }, toolContext });
  // @ts-expect-error tenantId is a string in the schema
  await supervisor.startAgent(orders, { scope: { tenantId: 42, userId: 'u-1' }, toolContext });
  // @ts-expect-error the agent's tools read requestId: toolContext is required
  await supervisor.startAgent(orders, { scope });
  // @ts-expect-error requestId is a string
  await supervisor.startAgent(orders, { scope, toolContext: { requestId: 1 } });
  await supervisor.startAgent(defineAgent({ name: 'a', instructions: '', tools: [tenantOnly], model: model() }), {
    scope,
  });
  // @ts-expect-error its tool reads scope.orgId, which this supervisor's schema does not produce
  await supervisor.startAgent(defineAgent({ name: 'a', instructions: '', tools: [orgReader], model: model() }), {
    scope,
  });
  await supervisor.spawn(orders, { input: 'who?', scope, toolContext });
  // @ts-expect-error spawn checks the scope too
  await supervisor.spawn(orders, { input: 'who?', scope: { tenantId: 'acme' }, toolContext });
  // By name the agent is not known: the scope is still the schema's input.
  await supervisor.startAgent('orders', { scope });
  // @ts-expect-error by name too
  await supervisor.startAgent('orders', { scope: { tenantId: 'acme' } });
}

export async function wrongToolContextKeys(supervisor: Supervisor<TenantScope>): Promise<void> {
  // Issue 32: a misspelt or missing key is reported where it is (each directive sits on the line
  // the error must be on: one reported at the call, as the agent not being a name, would leave it unused).
  const scope = { tenantId: 'acme', userId: 'u-1' };
  await supervisor.startAgent(orders, {
    scope,
    // @ts-expect-error a misspelt key: "requestid does not exist ... Did you mean requestId?"
    toolContext: { requestid: 'req-1' },
  });
  await supervisor.startAgent(orders, {
    scope,
    // @ts-expect-error requestId is missing from the toolContext
    toolContext: {},
  });
  await supervisor.spawn(orders, {
    input: 'who?',
    scope,
    // @ts-expect-error spawn too
    toolContext: { requestid: 'req-1' },
  });
  // An agent and a name go through one signature: a name still takes any toolContext.
  await supervisor.startAgent('orders', { scope, toolContext: { anything: 1 } });
}

export async function answerAfterRestart(): Promise<void> {
  // Issue 32: answering a request this supervisor does not hold restores its conversation with the
  // scope and toolContext given: when the agents' tools declare keys, the toolContext is required.
  const supervisor = createSupervisor({ scope: TenantScope, agents: [orders] });
  const scope = { tenantId: 'acme', userId: 'u-1' };
  await supervisor.answer('req_1', { ok: true }, { scope, toolContext: { requestId: 'req-2' } });
  // Held here (no scope): no restore, nothing to give.
  await supervisor.answer('req_1', { ok: true });
  // @ts-expect-error with a scope, the toolContext its tools read is required
  await supervisor.answer('req_1', { ok: true }, { scope });
  await supervisor.answer(
    'req_1',
    { ok: true },
    {
      scope,
      // @ts-expect-error a misspelt key, at the key
      toolContext: { requestid: 'req-2' },
    },
  );
  // @ts-expect-error the scope is the schema's input
  await supervisor.answer('req_1', { ok: true }, { scope: { tenantId: 'acme' }, toolContext: { requestId: 'r' } });
  // Agents that declare nothing: nothing is required.
  const free = createSupervisor({ agents: [defineAgent({ name: 'free', instructions: '', model: model() })] });
  await free.answer('req_1', { ok: true }, { scope: { anything: 1 } });
  // No agents given: nothing is known, nothing required.
  await createSupervisor().answer('req_1', { ok: true }, { scope: {} });
}

export function tenantKeyTypes(): void {
  // Issue 32: tenantKey reads the scope the supervisor's schema produces, typed.
  const tenantKey: TenantKey<TenantScope> = (scope) => scope.tenantId;
  createSupervisor({ scope: TenantScope, persistence: new MemoryPersistence({ tenantKey }) });
  createSupervisor({
    scope: TenantScope,
    persistence: sqlitePersistence({ file: ':memory:', tenantKey: (scope: TenantScope) => scope.userId }),
  });
  const memory = new MemoryPersistence({ tenantKey: (scope: TenantScope) => scope.tenantId });
  expectType<Equal<typeof memory, MemoryPersistence<TenantScope>>>();
  // An untyped store fits every supervisor.
  createSupervisor({ scope: TenantScope, persistence: new MemoryPersistence() });
  const Org = defineScope(z.object({ orgId: z.string() }));
  // @ts-expect-error a store whose tenantKey reads the tenant scope, given to a supervisor of another schema
  createSupervisor({ scope: Org, persistence: memory });
  // @ts-expect-error tenantKey reads what the schema produces: there is no orgId in it
  const wrong: TenantKey<TenantScope> = (scope) => scope.orgId;
  assert.ok(wrong);
}

export async function postgresTenantKeyTypes(): Promise<void> {
  // The PostgreSQL store is typed the same way.
  const store = await postgresPersistence({
    connectionString: 'postgres://x',
    tenantKey: (s: TenantScope) => s.tenantId,
  });
  expectType<Equal<typeof store, PostgresPersistence<TenantScope>>>();
  createSupervisor({ scope: TenantScope, persistence: store });
  const Org = defineScope(z.object({ orgId: z.string() }));
  // @ts-expect-error typed for the tenant scope, given to a supervisor of another schema
  createSupervisor({ scope: Org, persistence: store });
}

export async function schemaInputAndOutput(): Promise<void> {
  // What startAgent takes is the schema's input; what tools read, its output.
  const Limited = defineScope(z.object({ tenantId: z.string(), limit: z.string().transform(Number) }));
  const reader = defineTool({
    name: 'limit',
    description: 'Read the limit',
    parameters: z.object({}),
    execute: (_args, ctx: ToolContext<ScopeOf<typeof Limited>>) => {
      expectType<Equal<typeof ctx.scope.limit, number>>();
      return ctx.scope.limit + 1;
    },
  });
  const agent = defineAgent({ name: 'limited', instructions: '', tools: [reader], model: model() });
  const supervisor = createSupervisor({ scope: Limited });
  await supervisor.startAgent(agent, { scope: { tenantId: 'acme', limit: '5' } });
  // @ts-expect-error the schema takes the limit as a string
  await supervisor.startAgent(agent, { scope: { tenantId: 'acme', limit: 5 } });
}

export async function withoutSchema(): Promise<void> {
  // No schema: the scope passed is what the tools get, so it must be what they read.
  const supervisor = createSupervisor();
  await supervisor.startAgent(orders, { scope: { tenantId: 'acme', userId: 'u-1' }, toolContext: { requestId: 'r' } });
  // @ts-expect-error the tools read userId
  await supervisor.startAgent(orders, { scope: { tenantId: 'acme' }, toolContext: { requestId: 'r' } });
  const readsNothing = defineAgent({ name: 'free', instructions: '', model: model() });
  await supervisor.startAgent(readsNothing, { scope: { anything: ['goes'] } });
}

describe('typed scope and tool context, at run time', () => {
  it('a typed agent reads its scope and toolContext without casts', async () => {
    await using supervisor = createSupervisor({ scope: TenantScope });
    const agent = await supervisor.startAgent(orders, {
      scope: { tenantId: 'acme', userId: 'u-1' },
      toolContext: { requestId: 'req-7' },
    });
    const reply = await agent.send('who?');
    assert.equal(reply.status, 'done');
    assert.equal(reply.status === 'done' ? reply.text : '', 'acme/u-1 req-7');
  });

  it('a scope the types refuse is still refused at run time when it arrives untyped', async () => {
    await using supervisor = createSupervisor({ scope: TenantScope });
    const untyped = JSON.parse('{ "tenantId": "acme" }');
    await assert.rejects(
      supervisor.startAgent(orders, { scope: untyped, toolContext: { requestId: 'req-8' } }),
      (error: unknown) => error instanceof Error && /scope\.userId/.test(error.message),
    );
  });
});
