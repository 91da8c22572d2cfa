// Native dependencies (better-sqlite3) build from source with node-gyp, which
// would download Node's headers; this machine has none to download from but
// ships them in /usr/include/node. pnpm passes only a few environment variables
// to build scripts, so point node-gyp at the local headers here.
const fs = require('node:fs');

module.exports = {
  hooks: {
    updateConfig(config) {
      // biome-ignore lint/suspicious/noUndeclaredEnvVars: read by pnpm at install, never by a turbo task
      if (process.env.npm_config_nodedir !== undefined || !fs.existsSync('/usr/include/node/node.h')) return config;
      config.extraEnv = { ...config.extraEnv, npm_config_nodedir: '/usr' };
      return config;
    },
  },
};
