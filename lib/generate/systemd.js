'use strict'

// `pool config systemd`: a systemd service unit that runs `pool start` and lets systemd stop and
// reload it the way the pool expects. Like the other configs, the text explains itself in
// comments, because operators read the unit, not this file.

const path = require('node:path')
const { resolveOptions, OPTIONS: POOL_OPTIONS } = require('../options/table')
const { poolError, codes } = require('../errors')
const { duration } = require('./haproxy')

const POOL_BIN = path.resolve(__dirname, '..', '..', 'bin', 'pool.js')
// A unit name systemd takes as it is (no template '@', no escaping); 64 characters keep
// /run/NAME/pool.sock far below the 107 bytes of a unix socket path.
const UNIT_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/
const ACCOUNT = /^[A-Za-z0-9_][A-Za-z0-9_.-]*$/
// systemd reads quotes, backslashes, '$' (variables) and '%' (specifiers) in a command line, and
// '%' in paths: refusing them keeps every word literal, so the unit runs what it shows.
const UNSAFE = /[\s"'\\$%;\x00-\x1f\x7f]/
// `pool reload` waits this long by default; systemd's bound must be longer
// so the client, not systemd, reports a reload that never finishes.
const RELOAD_CLIENT_TIMEOUT = 15 * 60000
// Flags the unit sets itself, so that its timeouts and ExecReload stay in step with the pool;
// each maps to what to give `pool config systemd` instead.
const OWN_FLAGS = {
  '--control': '--name (the socket is /run/NAME/pool.sock)',
  '--graceful-timeout': '--graceful-timeout',
  '--kill-timeout': '--kill-timeout'
}

// In the option table's format, so the CLI builds its flags from it.
const OPTIONS = {
  app: {
    flag: 'app',
    kind: 'string',
    group: 'Service',
    defaultText: 'required',
    describe: 'The app `pool start` runs: a path relative to --working-directory, or absolute'
  },
  name: {
    flag: 'name',
    kind: 'string',
    default: 'pool-app',
    group: 'Service',
    describe: 'Unit name (NAME.service); also its runtime directory /run/NAME, which holds the control socket'
  },
  workingDirectory: {
    flag: 'working-directory',
    kind: 'string',
    default: () => process.cwd(),
    defaultText: 'the current directory',
    group: 'Service',
    describe: 'Directory the pool runs in'
  },
  user: { flag: 'user', kind: 'string', group: 'Service', defaultText: 'root', describe: 'User the pool runs as' },
  group: {
    flag: 'group',
    kind: 'string',
    group: 'Service',
    defaultText: 'the user\'s group',
    describe: 'Group the pool runs as'
  },
  node: {
    flag: 'node',
    kind: 'string',
    default: () => process.execPath,
    defaultText: 'the node running this command',
    group: 'Service',
    describe: 'Absolute path of the node binary the unit runs (must be readable by --user)'
  },
  poolBin: {
    flag: 'pool-bin',
    kind: 'string',
    default: () => POOL_BIN,
    defaultText: 'this installation\'s bin/pool.js',
    group: 'Service',
    describe: 'Path of pool\'s bin/pool.js (or node_modules/.bin/pool) the unit runs with --node'
  },
  gracefulTimeout: {
    ...POOL_OPTIONS.gracefulTimeout,
    group: 'Pool',
    describe: 'The pool\'s --graceful-timeout; TimeoutStopSec is set above it'
  },
  killTimeout: {
    ...POOL_OPTIONS.killTimeout,
    group: 'Pool',
    describe: 'The pool\'s --kill-timeout; TimeoutStopSec is set above it'
  },
  args: {
    flag: 'args',
    kind: 'string',
    group: 'Pool',
    describe: 'More `pool start` flags, as one string after \'=\' (it starts with a dash): --args=\'-n 15 --balancer ' +
      'haproxy\''
  },
  socket: {
    flag: 'socket',
    kind: 'bool',
    default: false,
    group: 'Service',
    describe: 'Started by NAME.socket (`pool config systemd-socket`), which holds the pool\'s ports across restarts: ' +
      'connections wait instead of being refused'
  }
}

// `pool config systemd-socket`: the socket unit beside the service, same --name.
const SOCKET_OPTIONS = {
  name: OPTIONS.name,
  host: {
    flag: 'host',
    kind: 'string',
    default: '127.0.0.1',
    group: 'Socket',
    describe: 'Address of the embedded balancer\'s port (pool start --host)'
  },
  port: {
    flag: 'port',
    kind: 'port',
    default: 9001,
    group: 'Socket',
    describe: 'The embedded balancer\'s port (pool start --port)'
  },
  statsHost: {
    flag: 'stats-host',
    kind: 'string',
    default: '127.0.0.1',
    group: 'Socket',
    describe: 'Address of the stats listener (pool start --stats-host)'
  },
  statsPort: {
    flag: 'stats-port',
    kind: 'port-or-off',
    default: 9000,
    group: 'Socket',
    describe: 'Port of the stats listener (pool start --stats-port; 0: not held by the socket unit)'
  }
}

function bad (message) {
  return poolError(codes.BAD_OPTION, message)
}

function checkWord (what, word) {
  if (UNSAFE.test(word)) {
    throw bad(`${what} must not contain spaces, quotes, backslashes, '$', '%' or ';' (got '${word}')`)
  }
  return word
}

function absolutePath (flag, p) {
  return checkWord(`--${flag}`, path.resolve(p))
}

// `args` is a string from the CLI, or an array of words from the library.
function splitArgs (args) {
  if (args === undefined) return []
  const words = Array.isArray(args) ? args.map(String) : String(args).trim().split(/\s+/).filter(Boolean)
  for (const word of words) {
    checkWord('each word of --args', word)
    const own = Object.keys(OWN_FLAGS).find((flag) => word === flag || word.startsWith(`${flag}=`))
    if (own) {
      throw bad(`--args must not contain ${own}: the unit sets it; give ${OWN_FLAGS[own]} to \`pool config systemd\` ` +
        'instead')
    }
  }
  return words
}

// Fill defaults and reject what systemd would refuse, misread or expand.
function resolveSystemdOptions (input = {}) {
  const { args, ...rest } = input
  const o = resolveOptions(rest, OPTIONS)
  if (o.app === undefined) throw bad('--app is required: the app file `pool start` runs')
  checkWord('--app', o.app)
  if (!UNIT_NAME.test(o.name)) {
    throw bad(`--name must be 1-64 letters, digits, '-', '_' or '.', starting with a letter or digit (got '${o.name}')`)
  }
  // /run/pool is where `pool config haproxy` puts HAProxy's sockets by default, and systemd
  // empties a unit's RuntimeDirectory at every stop.
  if (o.name === 'pool') {
    throw bad('--name pool would make /run/pool the unit\'s runtime directory, which systemd removes at every stop; ' +
      '`pool config haproxy` keeps HAProxy\'s sockets there')
  }
  for (const flag of ['user', 'group']) {
    if (o[flag] !== undefined && !ACCOUNT.test(o[flag])) {
      throw bad(`--${flag} must be a user or group name (got '${o[flag]}')`)
    }
  }
  o.workingDirectory = absolutePath('working-directory', o.workingDirectory)
  o.node = absolutePath('node', o.node)
  o.poolBin = absolutePath('pool-bin', o.poolBin)
  o.args = splitArgs(args)
  o.runtimeDirectory = `/run/${o.name}`
  o.control = `${o.runtimeDirectory}/pool.sock`
  return o
}

function usesHaproxy (args) {
  return args.some((word, i) => word === '--balancer=haproxy' || (word === '--balancer' && args[i + 1] === 'haproxy'))
}

// The pool's worst case from SIGTERM to exit: the drain (--graceful-timeout), SIGTERM and
// --kill-timeout, then SIGKILL; its last-resort exit timer allows twice --kill-timeout plus 2 s.
// Ten seconds more, so systemd's SIGKILL never cuts the pool's own stop short.
function stopTimeoutSeconds (o) {
  return Math.ceil((o.gracefulTimeout + 2 * o.killTimeout + 2000) / 1000) + 10
}

// Lines joined by systemd's backslash continuation, one group of flags per line.
function commandLine (key, groups) {
  return `${key}=` + groups.filter((g) => g.length > 0).map((g) => g.join(' ')).join(' \\\n    ')
}

function execStart (o) {
  const timing = []
  if (o.gracefulTimeout !== POOL_OPTIONS.gracefulTimeout.default) {
    timing.push('--graceful-timeout', duration(o.gracefulTimeout))
  }
  if (o.killTimeout !== POOL_OPTIONS.killTimeout.default) timing.push('--kill-timeout', duration(o.killTimeout))
  return commandLine('ExecStart', [[o.node, o.poolBin, 'start', o.app], ['--control', o.control, ...timing], o.args])
}

function unitSection (o) {
  const haproxy = usesHaproxy(o.args)
  return [
    '[Unit]',
    `Description=pool: ${o.app} in ${o.workingDirectory}`,
    `After=network.target${haproxy ? ' haproxy.service' : ''}${o.socket ? ` ${o.name}.socket` : ''}`,
    ...(haproxy ? ['Wants=haproxy.service'] : []),
    ...(o.socket
      ? ['# The ports are opened and held by the socket unit (`pool config systemd-socket`): the pool',
          '# listens on the sockets it is handed (LISTEN_FDS), so a restart refuses no connection.',
          `Requires=${o.name}.socket`]
      : []),
    ''
  ]
}

function serviceSection (o) {
  return [
    '[Service]',
    '# The pool tells systemd when its first workers are ready (READY=1: the unit is started',
    '# then, and what comes after it starts), how many serve (STATUS=, in `systemctl status`) and',
    '# when it stops (STOPPING=1). It does so through systemd-notify, a process of its own (Node',
    '# cannot write to the notify socket), which only NotifyAccess=all lets systemd hear.',
    'Type=notify',
    'NotifyAccess=all',
    ...(o.user ? [`User=${o.user}`] : []),
    ...(o.group ? [`Group=${o.group}`] : []),
    `WorkingDirectory=${o.workingDirectory}`,
    'Environment=NODE_ENV=production',
    execStart(o),
    '# A rolling reload that waits until every worker is replaced and exits non-zero when the',
    '# reload fails (a broken deploy keeps the old workers serving), so `systemctl reload`',
    '# reports the outcome. SIGHUP (kill -HUP $MAINPID) would reload too, but blindly.',
    commandLine('ExecReload', [[o.node, o.poolBin, 'reload', '--control', o.control]]),
    '# systemd bounds ExecReload by TimeoutStartSec (it has no reload timeout of its own), which',
    '# also bounds the start until READY=1 (every worker booted, within --boot-timeout each).',
    `# Above \`pool reload\`'s own ${RELOAD_CLIENT_TIMEOUT / 60000} min.`,
    `TimeoutStartSec=${Math.ceil(RELOAD_CLIENT_TIMEOUT / 60000) + 1}min`,
    '# SIGTERM to the pool only: it drains its workers and stops them itself. The workers do not',
    '# handle SIGTERM, so the default KillMode=control-group, which signals every process of the',
    '# unit at once, would kill them mid-request. Once the pool has exited (stopped, crashed or',
    '# killed), whatever is left of the unit gets SIGKILL, the app\'s detached children too; so',
    '# does everything, the pool included, at TimeoutStopSec. KillMode=process would leave them.',
    'KillMode=mixed',
    'KillSignal=SIGTERM',
    '# Above the pool\'s longest stop, --graceful-timeout + 2 x --kill-timeout + 2 s',
    `# (${duration(o.gracefulTimeout)} + 2 x ${duration(o.killTimeout)} + 2s here), with 10 s to spare.`,
    `TimeoutStopSec=${stopTimeoutSeconds(o)}`,
    '# A crash, a failed boot, or a dependency not up yet (HAProxy\'s socket missing: exit 2).',
    'Restart=on-failure',
    'RestartSec=2',
    `# ${o.runtimeDirectory}, the service user's alone, holds the control socket: run`,
    `# \`pool status|reload|scale|stop --control ${o.control}\` as that user.`,
    `RuntimeDirectory=${o.name}`,
    'RuntimeDirectoryMode=0700',
    ''
  ]
}

// The socket unit: systemd listens on the pool's ports and hands the sockets to every pool it
// starts, in the order of the ListenStream lines (the balancer's port, then the stats port).
function resolveSocketOptions (input = {}) {
  const o = resolveOptions(input, SOCKET_OPTIONS)
  if (!UNIT_NAME.test(o.name)) {
    throw bad(`--name must be 1-64 letters, digits, '-', '_' or '.', starting with a letter or digit (got '${o.name}')`)
  }
  for (const flag of ['host', 'stats-host']) checkWord(`--${flag}`, o[flag === 'host' ? 'host' : 'statsHost'])
  if (o.statsPort === o.port && o.statsHost === o.host) {
    throw bad(`--stats-port must differ from --port (both ${o.port})`)
  }
  return o
}

function listenAddress (host, port) {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`
}

function systemdSocketConfig (input = {}) {
  const o = resolveSocketOptions(input)
  const stats = o.statsPort !== 0
  return [
    `# /etc/systemd/system/${o.name}.socket, generated by \`pool config systemd-socket\`.`,
    `# With ${o.name}.service from \`pool config systemd --name ${o.name} --socket\`. Install:`,
    `#   systemctl daemon-reload && systemctl enable --now ${o.name}.socket ${o.name}.service`,
    '',
    '[Unit]',
    `Description=pool: the ports of ${o.name}.service`,
    '',
    '[Socket]',
    '# systemd listens here from now on and hands the sockets to each pool it starts (LISTEN_FDS),',
    '# in this order: the embedded balancer\'s port (pool start --port), then the stats port. While',
    '# the pool restarts, connections wait in the kernel\'s backlog (Backlog=, SOMAXCONN by default)',
    '# and the next pool accepts them: none is refused. The pool\'s own --port and --stats-port',
    '# do not matter then: it listens where it is handed.',
    `ListenStream=${listenAddress(o.host, o.port)}`,
    ...(stats ? [`ListenStream=${listenAddress(o.statsHost, o.statsPort)}`] : []),
    `Service=${o.name}.service`,
    '',
    '[Install]',
    'WantedBy=sockets.target',
    ''
  ].join('\n')
}

function systemdConfig (input = {}) {
  const o = resolveSystemdOptions(input)
  return [
    `# /etc/systemd/system/${o.name}.service, generated by \`pool config systemd\`.`,
    `# Install: systemctl daemon-reload && systemctl enable --now ${o.name}`,
    '',
    ...unitSection(o),
    ...serviceSection(o),
    '[Install]',
    'WantedBy=multi-user.target',
    ''
  ].join('\n')
}

module.exports = {
  systemdConfig,
  systemdSocketConfig,
  resolveSystemdOptions,
  stopTimeoutSeconds,
  OPTIONS,
  SOCKET_OPTIONS
}
