// The install test's consumer, with @troupe/openai: a chat-completions server
// on 127.0.0.1 streams an answer, and the chat agent, run on a worker thread,
// gets it through the `openai` package the consumer installed (the lowest
// version @troupe/openai's peer range allows). Prints one JSON line.
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createSupervisor } from '@troupe/supervisor';

const requests: { url: string | undefined; model: unknown; authorization: string | undefined }[] = [];
const chunk = (choices: unknown[], extra: object = {}): string =>
  `data: ${JSON.stringify({ id: 'c-1', object: 'chat.completion.chunk', created: 0, model: 'served-model', choices, ...extra })}\n\n`;
const server = createServer((req, res) => {
  let body = '';
  req.setEncoding('utf8');
  req.on('data', (data: string) => {
    body += data;
  });
  req.on('end', () => {
    requests.push({
      url: req.url,
      model: (JSON.parse(body) as { model?: unknown }).model,
      authorization: req.headers.authorization,
    });
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(chunk([{ index: 0, delta: { role: 'assistant', content: 'hello ' }, finish_reason: null }]));
    res.write(chunk([{ index: 0, delta: { content: 'from the server' }, finish_reason: null }]));
    res.write(chunk([{ index: 0, delta: {}, finish_reason: 'stop' }]));
    res.write(chunk([], { usage: { prompt_tokens: 7, completion_tokens: 4, total_tokens: 11 } }));
    res.end('data: [DONE]\n\n');
  });
});
server.listen(0, '127.0.0.1');
await once(server, 'listening');
process.env.TROUPE_CHAT_URL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
// Imported after the variable is set: the agent module reads it (here, and in the worker).
const { chat } = await import('./chat.js');
const supervisor = createSupervisor({ pool: { threads: 1 } });
try {
  const outcome = await supervisor.spawn(chat, { input: 'Say hello', scope: {} });
  console.log(
    JSON.stringify({
      status: outcome.status,
      result: outcome.status === 'done' ? outcome.result : null,
      usage: outcome.usage,
      requests,
    }),
  );
} finally {
  await supervisor.close({ timeoutMs: 5000 });
  server.closeAllConnections();
  server.close();
}
