// Type tests of structured output (issue 32, item 3): `defineAgent({ output })`
// types a reply's `output`, a spawn's, and what a parent's `task` call sees.
// As in scopeAndToolContext.test.ts: the `@ts-expect-error` lines must fail to
// compile (else `tsc -b` fails with TS2578), the `Equal` checks fail to compile
// when an inferred type changes, and the functions holding them are never
// called; the test at the end runs the typed program.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { type Agent, defineAgent, type OutputOf, type TaskResult } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import {
  type AgentHandle,
  type AgentReply,
  createSupervisor,
  type SubagentOutcome,
  type Supervisor,
} from '@troupe/supervisor';
import { z } from 'zod';

/** True when A and B are the same type (not merely assignable either way). */
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
/** Compiles only for `true`. */
const expectType = <T extends true>(): T => true as T;

const Forecast = z.object({ city: z.string(), tempC: z.number(), unit: z.enum(['C', 'F']).default('C') });
/** What the schema returns (the default filled in), not what it reads. */
type Forecast = { city: string; tempC: number; unit: 'C' | 'F' };

const forecaster = defineAgent({
  name: 'forecaster',
  instructions: 'Forecast.',
  model: new ScriptedModel([{ output: { city: 'Oslo', tempC: 4 } }]),
  output: Forecast,
});
const chatty = defineAgent({ name: 'chatty', instructions: 'Chat.', model: new ScriptedModel(['hi']) });

export function agentTypes(): void {
  expectType<Equal<typeof forecaster, Agent<unknown, Record<never, never>, Forecast>>>();
  expectType<Equal<OutputOf<typeof forecaster>, Forecast>>();
  expectType<Equal<OutputOf<typeof chatty>, undefined>>();
  // An agent of a known output is an agent (of any output).
  const every: readonly Agent[] = [forecaster, chatty];
  // @ts-expect-error an agent is held to the output it declares
  const wrong: Agent<unknown, Record<never, never>, { city: number }> = forecaster;
  assert.ok([every, wrong]);
}

export async function replyTypes(supervisor: Supervisor): Promise<void> {
  const handle = await supervisor.startAgent(forecaster, { scope: {} });
  expectType<Equal<typeof handle, AgentHandle<Forecast>>>();
  const reply = await handle.send('Oslo?');
  // @ts-expect-error only a done reply has an output
  reply.output.city;
  if (reply.status === 'done') {
    expectType<Equal<typeof reply.output, Forecast>>();
    const city: string = reply.output.city;
    // @ts-expect-error the output is a forecast, not a string
    const text: string = reply.output;
    assert.ok([city, text]);
  }
  const streamed = await handle.stream('Bergen?').reply;
  if (streamed.status === 'done') expectType<Equal<typeof streamed.output, Forecast>>();
  // A reply of a known output is a reply.
  const any: AgentReply = reply;

  const plain = await (await supervisor.startAgent(chatty, { scope: {} })).send('hi');
  if (plain.status === 'done') {
    expectType<Equal<typeof plain.output, undefined>>();
    // @ts-expect-error an agent without output has none
    plain.output.city;
  }
  const bare: AgentReply = plain;
  if (bare.status === 'done') expectType<Equal<typeof bare.output, unknown>>();
  assert.ok([any, bare]);
}

export async function spawnTypes(supervisor: Supervisor): Promise<void> {
  const outcome = await supervisor.spawn(forecaster, { input: 'Oslo?', scope: {} });
  expectType<Equal<typeof outcome, SubagentOutcome<Forecast>>>();
  if (outcome.status === 'done') {
    expectType<Equal<typeof outcome.output, Forecast>>();
    const tempC: number = outcome.output.tempC;
    assert.ok(tempC);
  }
  const any: SubagentOutcome = outcome;
  assert.ok(any);
}

export function taskTypes(result: TaskResult<Forecast>): void {
  // What a parent's task call sees: the child's output when it has one.
  if (result.status === 'done') expectType<Equal<typeof result.output, Forecast | undefined>>();
  const any: TaskResult = result;
  assert.ok(any);
}

it('a typed reply’s output is what the schema returned', async () => {
  await using supervisor = createSupervisor({ persistence: null });
  const handle = await supervisor.startAgent(forecaster, { scope: {} });
  const reply = await handle.send('Oslo?');
  assert.equal(reply.status, 'done');
  if (reply.status === 'done') assert.equal(reply.output.unit, 'C');
});
