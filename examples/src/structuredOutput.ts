import { defineAgent } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import { createSupervisor } from '@troupe/supervisor';
import { z } from 'zod';

// The final answer's shape: models are asked for it (with @troupe/openai, a JSON schema
// response format), the loop checks the answer, and `reply.output` is typed from it.
const Invoice = z.object({
  vendor: z.string(),
  total: z.number(),
  currency: z.enum(['EUR', 'USD']).default('EUR'),
});

const extractor = defineAgent({
  name: 'extractor',
  instructions: 'Extract the invoice.',
  output: Invoice,
  outputRetries: 2, // answers that do not match go back to the model, with what was wrong
  // A stand-in for an LLM whose first answer has the total as text.
  model: new ScriptedModel([
    { output: { vendor: 'Acme', total: '1,200' } },
    ({ messages }) => {
      console.log(messages.at(-1)?.content); // what the loop told it
      return { output: { vendor: 'Acme', total: 1200 } };
    },
  ]),
});

const supervisor = createSupervisor();
const agent = await supervisor.startAgent(extractor, { scope: {} });
const reply = await agent.send('Invoice 7 from Acme: 1,200 EUR');
if (reply.status === 'done') console.log(reply.output); // { vendor: string; total: number; currency: 'EUR' | 'USD' }
await supervisor.close();
