// redis-server, for @troupe/bullmq's tests, `pnpm demo:cluster` and
// `pnpm bench distributed` (each starts its own server on 127.0.0.1 on a free
// port and stops it; none uses a system service).
//
// - present on the PATH: nothing to do;
// - missing, as root with apt-get (a fresh Debian or Ubuntu machine, as CI
//   runs): `apt-get install -y redis-server`, without starting the system
//   service the package would start (a policy-rc.d that refuses every start,
//   for the length of the install, unless the machine has one of its own);
// - missing otherwise: print what to run; the install goes on (only the
//   scale-out tests and demos need the server, and they say so when they start).
import { spawnSync } from 'node:child_process';
import { existsSync, rmSync, writeFileSync } from 'node:fs';

const HOW =
  'Debian/Ubuntu: sudo apt-get install -y redis-server (then sudo systemctl disable --now redis-server: the tests start their own); macOS: brew install redis; or put a Redis 7 redis-server on the PATH';

/** Whether `command` runs from the PATH. */
function found(command) {
  const r = spawnSync(command, ['--version'], { stdio: 'ignore' });
  return r.error === undefined && r.status === 0;
}

function run(command, args) {
  console.log(`provision: ${command} ${args.join(' ')}`);
  const r = spawnSync(command, args, {
    stdio: ['ignore', 'inherit', 'inherit'],
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
  return r.error === undefined && r.status === 0;
}

export async function provisionRedis() {
  if (found('redis-server')) return;
  const root = typeof process.getuid === 'function' && process.getuid() === 0;
  if (!root || !found('apt-get')) {
    console.warn(`provision: redis-server is missing (the @troupe/bullmq tests and pnpm demo:cluster need it). ${HOW}`);
    return;
  }
  // Debian's maintainer scripts ask /usr/sbin/policy-rc.d whether they may start a service; 101
  // is "no". A machine that has its own policy keeps it (and its own decision).
  const policy = '/usr/sbin/policy-rc.d';
  const ownPolicy = !existsSync(policy);
  if (ownPolicy)
    writeFileSync(policy, '#!/bin/sh\n# written by troupe scripts/provision/redis.mjs for one install\nexit 101\n', {
      mode: 0o755,
    });
  try {
    // A fresh image has no package lists: install, and on failure update them and try once more.
    const installed =
      run('apt-get', ['install', '-y', '--no-install-recommends', 'redis-server']) ||
      (run('apt-get', ['update']) && run('apt-get', ['install', '-y', '--no-install-recommends', 'redis-server']));
    if (!installed || !found('redis-server')) {
      console.warn(`provision: could not install redis-server with apt-get (see above). ${HOW}`);
      return;
    }
    console.log('provision: redis-server installed (the system service is not started: tests start their own)');
  } finally {
    if (ownPolicy) rmSync(policy, { force: true });
  }
}
