// A chat-completions handler that follows the example agents' instructions
// the way a capable model would — deterministically, so that the demo's
// checks can hold on a real adapter: it reads which agent is asking from the
// tools it is offered, calls the tools the instructions name with the
// arguments they say, and answers in the shape they ask for. Streamed, with
// usage, like a real server.
import type { ServerResponse } from 'node:http';
import { event, type Handler, type Received, startSse } from '../openai/chatServer.js';

interface ChatMessage {
  readonly role: string;
  readonly content: string | null;
  readonly tool_calls?: readonly { readonly function: { readonly name: string } }[];
}

/** What the handler answers with: text, or tool calls. */
type Answer = { readonly text: string } | { readonly calls: readonly { name: string; arguments: unknown }[] };

const lastUser = (messages: readonly ChatMessage[]): string =>
  [...messages].reverse().find((m) => m.role === 'user')?.content ?? '';

/** The results of the latest turn's tool calls, in call order: a value (text) or an error object. */
function lastResults(messages: readonly ChatMessage[]): ({ ok: string } | { error: unknown })[] {
  const results: ({ ok: string } | { error: unknown })[] = [];
  for (let i = messages.length - 1; i >= 0 && messages[i]?.role === 'tool'; i--) {
    const content = messages[i]?.content ?? '';
    let parsed: unknown;
    try {
      parsed = JSON.parse(content);
    } catch {}
    const isError =
      typeof parsed === 'object' && parsed !== null && 'error' in parsed && 'code' in parsed && !('ok' in parsed);
    results.unshift(isError ? { error: parsed } : { ok: content });
  }
  return results;
}

/** As the instructions of `examples/src/agents/*.ts` ask. */
function answer(tools: readonly string[], messages: readonly ChatMessage[]): Answer {
  const task = lastUser(messages);
  const answering = messages[messages.length - 1]?.role === 'tool';
  const results = answering ? lastResults(messages) : [];
  // The values of results, and errors as `{ error }`: what "a JSON array of the results" means.
  const plain = () => JSON.stringify(results.map((r) => ('ok' in r ? r.ok : r)));
  if (tools.includes('task')) {
    if (answering) return { text: JSON.stringify(results) };
    return {
      calls: task
        .split('\n')
        .map((line) => line.split(':'))
        .filter((parts) => parts.length >= 2)
        .map(([subagent = '', ...rest]) => ({
          name: 'task',
          arguments: { subagent: subagent.trim(), instructions: rest.join(':').trim() },
        })),
    };
  }
  if (tools.includes('inspect_logs')) {
    return answering
      ? { text: results[0] !== undefined && 'ok' in results[0] ? results[0].ok : '{}' }
      : { calls: [{ name: 'inspect_logs', arguments: { service: task } }] };
  }
  if (tools.includes('sum_primes')) {
    return answering ? { text: plain() } : { calls: [{ name: 'sum_primes', arguments: {} }] };
  }
  if (tools.includes('deploy')) {
    return answering ? { text: plain() } : { calls: [{ name: 'deploy', arguments: { service: task } }] };
  }
  if (tools.includes('refund')) {
    if (answering) return { text: plain() };
    return {
      calls: task.split(',').map((item) => {
        const [order = '', amount = '0'] = item.trim().split('=');
        return { name: 'refund', arguments: { order, amount: Number(amount) } };
      }),
    };
  }
  if (tools.includes('export_report')) {
    return answering ? { text: 'exported' } : { calls: [{ name: 'export_report', arguments: {} }] };
  }
  if (tools.includes('call_upstream')) {
    return answering ? { text: plain() } : { calls: [{ name: 'call_upstream', arguments: { ms: Number(task) } }] };
  }
  return { text: 'ready' };
}

let calls = 0;

/** Streams what {@link answer} says, in pieces, as model `served`. */
function stream(res: ServerResponse, a: Answer, served: string): void {
  const chunk = (delta: unknown, finish: string | null = null) => ({
    model: served,
    choices: [{ index: 0, delta, finish_reason: finish }],
  });
  startSse(res);
  let output = 0;
  if ('text' in a) {
    // About four pieces, so that a reader sees a stream.
    const size = Math.max(1, Math.ceil(a.text.length / 4));
    for (let i = 0; i < a.text.length; i += size) event(res, chunk({ content: a.text.slice(i, i + size) }));
    event(res, chunk({}, 'stop'));
    output = a.text.length;
  } else {
    const n = ++calls;
    event(
      res,
      chunk({
        tool_calls: a.calls.map((c, i) => ({
          index: i,
          id: `call_${n}_${i}`,
          type: 'function',
          function: { name: c.name, arguments: JSON.stringify(c.arguments) },
        })),
      }),
    );
    event(res, chunk({}, 'tool_calls'));
    output = a.calls.length * 10;
  }
  event(res, {
    model: served,
    choices: [],
    usage: { prompt_tokens: 100, completion_tokens: output, prompt_tokens_details: { cached_tokens: 50 } },
  });
  res.end('data: [DONE]\n\n');
}

/** A handler for any number of requests: queue it once per request the test allows. */
export function instructedModel(served: string): Handler {
  return (res: ServerResponse, received: Received) => {
    const body = received.body as { tools?: { function: { name: string } }[]; messages: ChatMessage[] };
    const tools = (body.tools ?? []).map((t) => t.function.name);
    stream(res, answer(tools, body.messages), served);
  };
}

/** A model that does not follow the agents' instructions: whatever it is asked, it answers `text` in its own words. */
export function ownWordsModel(served: string, text: string): Handler {
  return (res: ServerResponse) => stream(res, { text }, served);
}
