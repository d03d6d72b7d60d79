'use strict'

// `pool config haproxy|nginx|edge|systemd [flags]`: print a production config on stdout. Each target is a
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
  },
  edge: {
    describe: 'print the haproxy.cfg of an edge in front of a fleet of hosts, each running a pool: one queue for the fleet',
    load: () => require('../config/edge'),
    render: (mod, options) => mod.edgeConfig(options),
    example: ['$0 config edge --hosts 10.0.0.11:9001,10.0.0.12:9001 --agent-port 9100 > /etc/haproxy/haproxy.cfg', 'two hosts, each running `pool start APP --host 0.0.0.0 --agent-port 9100`']
  },
  systemd: {
    describe: 'print a systemd service unit that runs `pool start` (stop, reload and timeouts as the pool expects)',
    load: () => require('../config/systemd'),
    render: (mod, options) => mod.systemdConfig(options),
    example: ["$0 config systemd --app app.js --name ssr --user ssr --args='-n 15' > /etc/systemd/system/ssr.service", 'run it from the app\'s directory']
  }
}

const NAMES = Object.keys(TARGETS)

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

// ['a', 'b', 'c'] → 'a, b or c'
function listNames (names) {
  return names.length < 2 ? names.join('') : `${names.slice(0, -1).join(', ')} or ${names.at(-1)}`
}

module.exports = {
  command: 'config <target>',
  describe: `print a production config: ${listNames(NAMES)}`,
  builder: (y) => NAMES.reduce((acc, name) => acc.command(targetCommand(name)), y),
  // Reached only when <target> is none of the subcommands above.
  handler: (argv) => printError(poolError(codes.BAD_OPTION, `unknown config target '${argv.target}': use ${listNames(NAMES)}`))
}
