'use strict'

// `pool config haproxy|nginx|edge|systemd [flags]`: print a production config on stdout. Each target is a
// subcommand with its own flags, so `pool config nginx --balance first` is refused by yargs'
// strict mode instead of being silently ignored, and `--help` lists only what applies.
//
// `--config FILE` reads the file `pool start --config FILE` reads, so the generated config and
// the pool cannot drift apart: each target takes the keys that mean the same thing to it
// (`fromFile` below); its own flags win over the file.

const { toYargs, fromArgv } = require('./flags')
const { printError } = require('./output')
const { poolError, codes } = require('../errors')
const { readConfigFile } = require('../config/file')

const CONFIG_FLAG = {
  config: {
    flag: 'config',
    kind: 'string',
    group: 'Configuration',
    describe: 'The pool\'s config file (`pool start --config`): take the settings that correspond from it; flags win ' +
      'over it'
  }
}

// The HAProxy runtime API the pool drives is a unix socket path or host:port; haproxy.cfg's
// `stats socket` is the path only.
function socketPath (socket) {
  if (/^[^/]*:\d+$/.test(socket) || /^\[.*\]:\d+$/.test(socket)) return undefined
  return socket.replace(/^unix[@:]/, '')
}

const TARGETS = {
  haproxy: {
    describe: 'print a haproxy.cfg for the pool: servers worker1..N, admin socket, stats, /metrics',
    load: () => require('../generate/haproxy'),
    render: (mod, options) => mod.haproxyConfig(options),
    fromFile: (f) => ({
      workers: f.workers,
      maxWorkers: f.maxWorkers || undefined, // the pool's 0 (no bound) is no spare server here
      workerHost: f.workerHost,
      workerPort: f.workerPort,
      timeout: f.timeout,
      backend: f.haproxyBackend,
      socket: f.haproxySocket && socketPath(f.haproxySocket),
      stateFile: f.haproxyStateFile
    }),
    example: ['$0 config haproxy -n 15 --socket /run/pool/haproxy-admin.sock > /etc/haproxy/haproxy.cfg', '15 workers']
  },
  nginx: {
    describe: 'print the nginx.conf that fronts that HAProxy; every path under --prefix',
    load: () => require('../generate/nginx'),
    render: (mod, options) => mod.nginxConfig(options),
    fromFile: (f) => ({ timeout: f.timeout }),
    example: ['$0 config nginx --prefix /srv/nginx --port 8080 > /srv/nginx/nginx.conf', 'runs without root']
  },
  edge: {
    describe: 'print the haproxy.cfg of an edge in front of a fleet of hosts, each running a pool: one queue for the ' +
      'fleet',
    load: () => require('../generate/edge'),
    render: (mod, options) => mod.edgeConfig(options),
    // Each host's pool: its workers are the host's maxconn until its agent answers.
    fromFile: (f) => ({ workers: f.workers, agentPort: f.agentPort || undefined, timeout: f.timeout }),
    example: ['$0 config edge --hosts 10.0.0.11:9001,10.0.0.12:9001 --agent-port 9100 > /etc/haproxy/haproxy.cfg',
      'two hosts, each running `pool start APP --host 0.0.0.0 --agent-port 9100`']
  },
  systemd: {
    describe: 'print a systemd service unit that runs `pool start` (stop, reload and timeouts as the pool expects)',
    load: () => require('../generate/systemd'),
    render: (mod, options) => mod.systemdConfig(options),
    // The unit's `pool start` reads the file too; --balancer haproxy is repeated on its command
    // line so that the unit orders itself after haproxy.service.
    fromFile: (f, file, args) => ({
      app: f.app,
      gracefulTimeout: f.gracefulTimeout,
      killTimeout: f.killTimeout,
      args: [...splitWords(args), '--config', file.path, ...(f.balancer === 'haproxy' ? ['--balancer', 'haproxy'] : [])]
    }),
    example: ["$0 config systemd --app app.js --name ssr --user ssr --args='-n 15' > /etc/systemd/system/ssr.service",
      'run it from the app\'s directory']
  },
  kubernetes: {
    describe: 'print the Kubernetes manifests of an elastic fleet: pods running pool start, a headless Service, an ' +
      'edge HAProxy that finds the pods by DNS',
    load: () => require('../generate/kubernetes'),
    render: (mod, options) => mod.kubernetesConfig(options),
    fromFile: (f) => ({
      timeout: f.timeout,
      gracefulTimeout: f.gracefulTimeout,
      killTimeout: f.killTimeout,
      port: f.port,
      agentPort: f.agentPort || undefined
    }),
    example: ['$0 config kubernetes --image registry.example/ssr:1.4 --name ssr --replicas 3 > fleet.yaml',
      'then: kubectl apply -f fleet.yaml']
  },
  'systemd-socket': {
    describe: 'print the systemd socket unit that holds the pool\'s ports across restarts (with `pool config systemd ' +
      '--socket`)',
    load: () => ({ ...require('../generate/systemd'), OPTIONS: require('../generate/systemd').SOCKET_OPTIONS }),
    render: (mod, options) => mod.systemdSocketConfig(options),
    fromFile: (f) => ({ host: f.host, port: f.port, statsHost: f.statsHost, statsPort: f.statsPort }),
    example: ['$0 config systemd-socket --name ssr --port 9001 > /etc/systemd/system/ssr.socket',
      'the ports of ssr.service']
  }
}

const NAMES = Object.keys(TARGETS)

function targetCommand (name) {
  const target = TARGETS[name]
  return {
    command: name,
    describe: target.describe,
    // Each example as a comment line over its command, as `pool start --help` shows them.
    builder: (y) => y.options(toYargs({ ...target.load().OPTIONS, ...CONFIG_FLAG }))
      .example(`# ${target.example[1]}`, '').example(target.example[0], '')
      .example('# the settings that correspond, from the pool\'s config file',
        '').example(`$0 config ${name} --config pool.config.json`, ''),
    handler: (argv) => {
      try {
        const mod = target.load()
        process.stdout.write(target.render(mod, optionsOf(target, mod, argv)))
      } catch (err) {
        printError(err)
      }
    }
  }
}

// The target's flags over what it takes from the --config file.
function optionsOf (target, mod, argv) {
  const flags = fromArgv(argv, mod.OPTIONS)
  const { config } = fromArgv(argv, CONFIG_FLAG)
  if (config === undefined) return flags
  const file = readConfigFile(config)
  const fromFile = target.fromFile(file.values, file, flags.args)
  for (const key of Object.keys(fromFile)) if (fromFile[key] === undefined) delete fromFile[key]
  // systemd's --args are already in fromFile.args, with the file's own flags after them.
  return { ...fromFile, ...flags, ...(fromFile.args ? { args: fromFile.args } : {}) }
}

function splitWords (args) {
  return args === undefined ? [] : String(args).trim().split(/\s+/).filter(Boolean)
}

// ['a', 'b', 'c'] → 'a, b or c'
function listNames (names) {
  return names.length < 2 ? names.join('') : `${names.slice(0, -1).join(', ')} or ${names.at(-1)}`
}

module.exports = {
  command: 'config <target>',
  targets: NAMES, // for `pool config TARGET --help` in usage errors
  describe: `print a production config: ${listNames(NAMES)}`,
  builder: (y) => NAMES.reduce((acc, name) => acc.command(targetCommand(name)), y),
  // Reached only when <target> is none of the subcommands above.
  handler: (argv) => printError(poolError(codes.BAD_OPTION,
    `unknown config target '${argv.target}': use ${listNames(NAMES)}`))
}
