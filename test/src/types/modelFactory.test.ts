// Type tests of model factories (issue 32, item 4): `defineAgent({ model })`
// takes a model or a function that makes one (sync or async); anything else
// does not compile. As in scopeAndToolContext.test.ts: the `@ts-expect-error`
// lines must fail to compile (else `tsc -b` fails with TS2578), and the
// functions holding them are never called.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { type Agent, defineAgent, type Model, type ModelFactory } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import { type OpenAIModel, openaiModel } from '@troupe/openai';
import { createSupervisor } from '@troupe/supervisor';

/** True when A and B are the same type (not merely assignable either way). */
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
/** Compiles only for `true`. */
const expectType = <T extends true>(): T => true as T;

export function factoryTypes(): void {
  const sync = defineAgent({
    name: 'sync',
    instructions: '',
    model: () => openaiModel({ baseURL: process.env.MODEL_URL ?? 'http://127.0.0.1:11434/v1', model: 'llama3.2' }),
  });
  const named: ModelFactory<OpenAIModel> = () =>
    openaiModel({ baseURL: 'http://127.0.0.1:11434/v1', model: 'llama3.2' });
  const async = defineAgent({ name: 'async', instructions: '', model: async () => ScriptedModel.answering('hi') });
  const plain = defineAgent({ name: 'plain', instructions: '', model: named });
  // An agent's model is a model, however it was given.
  expectType<Equal<typeof sync.model, Model>>();
  const every: readonly Agent[] = [sync, async, plain];
  // @ts-expect-error a factory returns a model, not a string
  defineAgent({ name: 'text', instructions: '', model: () => 'gpt-4.1-mini' });
  // @ts-expect-error a factory takes no arguments: it reads what it needs itself
  defineAgent({ name: 'args', instructions: '', model: (baseURL: string) => openaiModel({ baseURL, model: 'm' }) });
  // @ts-expect-error an async factory resolves to a model
  defineAgent({ name: 'late', instructions: '', model: async () => ({ name: 'half a model' }) });
  // @ts-expect-error a model name is not a model
  defineAgent({ name: 'id', instructions: '', model: 'gpt-4.1-mini' });
  assert.ok(every);
}

it('a typed factory’s model answers, and names the agent’s model once it is made', async () => {
  const agent = defineAgent({ name: 'made', instructions: '', model: async () => ScriptedModel.answering('made') });
  assert.equal(agent.model.name, undefined, 'nothing is made before the first use');
  await using supervisor = createSupervisor({ persistence: null });
  const reply = await (await supervisor.startAgent(agent, { scope: {} })).send('hi');
  assert.equal(reply.status === 'done' ? reply.text : reply.status, 'made');
  assert.equal(agent.model.name, 'scripted');
});
