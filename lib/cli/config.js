'use strict'

// `pool config haproxy|nginx [flags]`: print a production config on stdout. Each target is a
// subcommand with its own flags, so `pool config nginx --balance first` is refused by yargs'
// strict mode instead of being silently ignored, and `--help` lists only what applies.

const { toYargs, fromArgv } = require('./flags')
const { printError } = require('./output')
const { poolError, codes } = require('../errors')

const TARGETS = {
  haproxy: {
    describe: 'print a haproxy.cfg for the pool: servers worker1..N, admin socket, stats, /metrics',
    load: () => require('../config/haproxy'),
    render: (mod, options) => mod.haproxyConfig(options),
    example: ['$0 config haproxy -n 15 --socket /run/pool/haproxy-admin.sock > /etc/haproxy/haproxy.cfg', '15 workers']
  },
  nginx: {
    describe: 'print the nginx.conf that fronts that HAProxy; every path under --prefix',
    load: () => require('../config/nginx'),
    render: (mod, options) => mod.nginxConfig(options),
    example: ['$0 config nginx --prefix /srv/nginx --port 8080 > /srv/nginx/nginx.conf', 'runs without root']
  }
}

function targetCommand (name) {
  const target = TARGETS[name]
  return {
    command: name,
    describe: target.describe,
    builder: (y) => y.options(toYargs(target.load().OPTIONS)).example(...target.example),
    handler: (argv) => {
      try {
        const mod = target.load()
        process.stdout.write(target.render(mod, fromArgv(argv, mod.OPTIONS)))
      } catch (err) {
        printError(err)
      }
    }
  }
}

module.exports = {
  command: 'config <target>',
  describe: 'print a production config: haproxy or nginx',
  builder: (y) => y
    .command(targetCommand('haproxy'))
    .command(targetCommand('nginx')),
  // Reached only when <target> is none of the subcommands above.
  handler: (argv) => printError(poolError(codes.BAD_OPTION, `unknown config target '${argv.target}': use haproxy or nginx`))
}
