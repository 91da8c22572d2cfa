// Provision PostgreSQL's server binaries for the tests and benchmarks of @troupe/postgres, which
// start their own server (initdb into a temporary directory, 127.0.0.1, a free port). Run by
// `pnpm install` (the root postinstall, through index.mjs). Does nothing when the binaries are
// there. As root on Debian: installs Debian's `postgresql` package, without the cluster it would
// otherwise create and start (no server is left running). Otherwise it says how to get them; an
// install never fails for it.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const DEBIAN = '/usr/lib/postgresql';

function serverBin() {
  const given = process.env.TROUPE_POSTGRES_BIN;
  const dirs = given ? [given] : [];
  if (existsSync(DEBIAN)) {
    for (const v of readdirSync(DEBIAN)
      .filter((d) => /^\d+$/.test(d))
      .sort((a, b) => b - a))
      dirs.push(join(DEBIAN, v, 'bin'));
  }
  return dirs.find((d) => existsSync(join(d, 'postgres')) && existsSync(join(d, 'initdb')));
}

function hasUser(name) {
  try {
    execFileSync('id', ['-u', name], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** @returns {void} */
export function provisionPostgres() {
  const root = process.getuid?.() === 0;
  if (serverBin() !== undefined && (!root || hasUser('postgres'))) return;
  const hint =
    'the tests of @troupe/postgres start their own PostgreSQL server and need its binaries: ' +
    'run `apt-get install -y postgresql` (Debian, as root; or `pnpm install` as root does it), ' +
    'or set TROUPE_POSTGRES_BIN to a directory holding initdb and postgres (15 or later)';
  if (!root || !existsSync('/usr/bin/apt-get')) {
    console.warn(`provision: PostgreSQL not found: ${hint}`);
    return;
  }
  // No cluster of the package's own: it would be created and started on port 5432.
  const conf = '/etc/postgresql-common/createcluster.conf';
  if (!existsSync(conf)) {
    mkdirSync('/etc/postgresql-common', { recursive: true });
    writeFileSync(conf, 'create_main_cluster = false\n');
  }
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const install = () =>
    execFileSync('apt-get', ['install', '-y', '--no-install-recommends', 'postgresql', 'postgresql-client'], {
      stdio: 'inherit',
      env,
    });
  console.log('provision: installing PostgreSQL (Debian package postgresql) for the tests of @troupe/postgres');
  try {
    try {
      install();
    } catch {
      execFileSync('apt-get', ['update'], { stdio: 'inherit', env });
      install();
    }
  } catch (error) {
    console.warn(`provision: installing PostgreSQL failed (${error.message}): ${hint}`);
  }
}
