// Native dependencies (better-sqlite3) build from source with node-gyp, which
// would download Node's headers; this machine has none to download from. pnpm
// passes only a few environment variables to build scripts, so name the
// headers here: those of the Node.js that runs pnpm (it runs the build too),
// which ship beside its binary (`<prefix>/include/node`: /usr for a
// distribution's Node, the unpacked directory for an official build). Never
// another Node's: a binary built against Node 20's headers does not load in
// Node 24, and pnpm would cache it as built for Node 24. An explicit
// npm_config_nodedir wins, and is passed on so that no .npmrc overrides it.
const fs = require('node:fs');
const path = require('node:path');

function headersOfThisNode() {
  const prefix = path.resolve(path.dirname(process.execPath), '..');
  return fs.existsSync(path.join(prefix, 'include', 'node', 'node.h')) ? prefix : undefined;
}

module.exports = {
  hooks: {
    updateConfig(config) {
      // biome-ignore lint/suspicious/noUndeclaredEnvVars: read by pnpm at install, never by a turbo task
      const nodedir = process.env.npm_config_nodedir || headersOfThisNode();
      if (nodedir === undefined) return config;
      config.extraEnv = { ...config.extraEnv, npm_config_nodedir: nodedir };
      return config;
    },
  },
};
