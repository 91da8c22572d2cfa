// The test Redis itself: a free port on 127.0.0.1, noeviction, no persistence
// unless asked, pause/resume/restart for the failure tests, and no server left
// behind when the test process is SIGKILLed.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { Socket } from 'node:net';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { REDIS_MISSING, startRedis } from '../servers/redis.js';

const child = fileURLToPath(new URL('./redisChild.js', import.meta.url));

/** The process's state letter from /proc (R, S, T for stopped...). */
function state(pid: number): string {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
}

test('a server on 127.0.0.1 on a free port, noeviction, nothing persisted', async () => {
  const redis = await startRedis();
  try {
    assert.match(redis.url, /^redis:\/\/127\.0\.0\.1:\d+$/);
    assert.equal(await redis.command('PING'), 'PONG');
    assert.equal(await redis.command('CONFIG', 'GET', 'maxmemory-policy'), 'maxmemory-policy\nnoeviction');
    assert.equal(await redis.command('CONFIG', 'GET', 'appendonly'), 'appendonly\nno');
    assert.equal(await redis.command('CONFIG', 'GET', 'save'), 'save\n');
    assert.equal(await redis.command('CONFIG', 'GET', 'bind'), 'bind\n127.0.0.1');
  } finally {
    await redis.stop();
    await redis.stop();
  }
});

test('two servers of one test get two ports', async () => {
  const [a, b] = await Promise.all([startRedis(), startRedis()]);
  try {
    assert.notEqual(a.port, b.port);
    await a.command('SET', 'k', 'a');
    assert.equal(await b.command('GET', 'k'), '');
  } finally {
    await Promise.all([a.stop(), b.stop()]);
  }
});

test('pause holds every answer until resume', async () => {
  const redis = await startRedis();
  try {
    redis.pause();
    // SIGSTOP is delivered asynchronously: the command below is sent either way, and cannot be
    // answered before the resume once the process is stopped.
    const answered = redis.command('PING');
    let early = false;
    void answered.then(() => {
      early = true;
    });
    while (state(redis.pid) !== 'T') await new Promise<void>((r) => setImmediate(r));
    assert.equal(early, false, 'a stopped server answered');
    redis.resume();
    assert.equal(await answered, 'PONG');
  } finally {
    await redis.stop();
  }
});

test('restart empties the server on the same port; with persistence it keeps what was written', async () => {
  const redis = await startRedis();
  const kept = await startRedis({ persistence: true });
  try {
    await redis.command('SET', 'k', 'v');
    const port = redis.port;
    const pid = redis.pid;
    await redis.restart();
    assert.equal(redis.port, port);
    assert.notEqual(redis.pid, pid);
    assert.equal(await redis.command('GET', 'k'), '');
    await kept.command('SET', 'k', 'v');
    await kept.restart({ empty: false });
    assert.equal(await kept.command('GET', 'k'), 'v');
  } finally {
    await Promise.all([redis.stop(), kept.stop()]);
  }
});

test('dump reads every key and value', async () => {
  const redis = await startRedis();
  try {
    await redis.command('SET', 's', 'marker-1');
    await redis.command('HSET', 'h', 'f', 'marker-2');
    await redis.command('RPUSH', 'l', 'marker-3');
    await redis.command('XADD', 'x', '*', 'f', 'marker-4');
    const dump = await redis.dump();
    for (const m of ['marker-1', 'marker-2', 'marker-3', 'marker-4']) assert.ok(dump.includes(m), m);
  } finally {
    await redis.stop();
  }
});

test('a test process killed with SIGKILL leaves no server behind', async () => {
  const proc = spawn(process.execPath, [child, 'start'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const [line] = (await once(proc.stdout, 'data')) as [Buffer];
  const { port } = JSON.parse(line.toString()) as { pid: number; port: number };
  // A connection to the server closes when the server dies.
  const socket = new Socket();
  socket.connect(port, '127.0.0.1');
  await once(socket, 'connect');
  const closed = once(socket, 'close');
  proc.kill('SIGKILL');
  await closed;
  socket.destroy();
  // Nothing listens on the port any more. (The dying server's sockets close one by one: a probe that
  // reaches its listening socket as that closes is reset, not refused. It tries again then.)
  let code: string | undefined;
  for (let tries = 0; tries < 20; tries++) {
    const probe = new Socket();
    probe.connect(port, '127.0.0.1');
    const [error] = (await once(probe, 'error')) as [NodeJS.ErrnoException];
    probe.destroy();
    code = error.code;
    if (code !== 'ECONNRESET') break;
  }
  assert.equal(code, 'ECONNREFUSED');
});

test('without redis-server, a start fails saying how to get it (never a skip)', async () => {
  const proc = spawn(process.execPath, [child, 'missing'], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, PATH: '/nonexistent' },
  });
  let out = '';
  proc.stdout.on('data', (c: Buffer) => {
    out += c.toString();
  });
  await once(proc, 'exit');
  assert.equal(out.trim(), REDIS_MISSING);
});
