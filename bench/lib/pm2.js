'use strict'

// PM2 as most Node users would run this app: cluster mode (`pm2 start app -i N`: PM2's daemon
// is the cluster primary, round-robin), `pm2 reload` for a rolling reload, PM2 restarting a
// worker that dies. From the pm2 package (a devDependency), its daemon in a temp PM2_HOME of its
// own, so nothing of a PM2 the machine may run is touched; `pm2 kill` stops it (stopAll() too).

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFile } = require('node:child_process')
const { onStopAll, waitForPort } = require('./procs')

const PM2 = (() => { try { return require.resolve('pm2/bin/pm2') } catch { return null } })()
const APP = path.join(__dirname, 'pm2-app.js')
const NAME = 'bench'

const available = () => PM2 !== null
const version = () => { try { return require('pm2/package.json').version } catch { return null } }

function pm2 (home, args, { env = {}, timeout = 120000 } = {}) {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [PM2, ...args], { env: { ...process.env, ...env, PM2_HOME: home, PM2_DISCRETE_MODE: 'true' }, timeout, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`pm2 ${args.join(' ')}: ${err.message}\n${stderr}`))
      else resolve(stdout)
    })
  })
}

// [{ id, pid, status }] of the app's processes.
async function list (home) {
  const out = await pm2(home, ['jlist'])
  const json = out.slice(out.indexOf('['))
  return JSON.parse(json).filter((p) => p.name === NAME).map((p) => ({ id: p.pm_id, pid: p.pid, status: p.pm2_env?.status }))
}

// Starts `workers` instances on `port`; resolves { url, home, daemonPid(), list(), reload(), stop() }
// once every instance is online and the port answers.
async function startPm2 ({ workers, port, app }) {
  if (!PM2) throw new Error('pm2 is not installed (npm install: it is a devDependency)')
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'pool-bench-pm2-'))
  let stopped = false
  const stop = async () => {
    if (stopped) return
    stopped = true
    const daemon = daemonPid()
    let alive = false
    try { alive = daemon > 0 && process.kill(daemon, 0) } catch {}
    // `pm2 kill` with no daemon would start one to kill it: only when one runs.
    if (alive) await pm2(home, ['kill'], { timeout: 30000 }).catch(() => {})
    // Whatever `pm2 kill` left (it should leave nothing) goes too.
    if (daemon) { try { process.kill(daemon, 'SIGKILL') } catch {} }
    fs.rmSync(home, { recursive: true, force: true })
  }
  const forget = onStopAll(stop)
  const daemonPid = () => { try { return Number(fs.readFileSync(path.join(home, 'pm2.pid'), 'utf8')) || null } catch { return null } }
  // Every pm2 command starts a daemon when none runs: once stopped, or with the daemon gone,
  // none is sent, so that nothing is left behind.
  const running = () => { const pid = !stopped && daemonPid(); if (!pid) return false; try { process.kill(pid, 0); return true } catch { return false } }
  try {
    await pm2(home, ['start', APP, '--name', NAME, '-i', String(workers)], { env: { PORT: String(port), ...(app ? { APP: app } : {}) } })
    const deadline = Date.now() + 60000
    while ((await list(home)).filter((p) => p.status === 'online').length < workers) {
      if (Date.now() > deadline) throw new Error(`pm2: ${workers} instances not online within 60 s`)
      await new Promise((resolve) => setTimeout(resolve, 200))
    }
    await waitForPort(port)
  } catch (err) {
    forget()
    await stop()
    throw err
  }
  return {
    url: `http://127.0.0.1:${port}`,
    home,
    daemonPid,
    list: () => (running() ? list(home) : Promise.resolve([])),
    // `pm2 reload`: each instance in turn replaced by a new one once that one listens.
    reload: () => (running() ? pm2(home, ['reload', NAME]) : Promise.reject(new Error('pm2 is not running'))),
    async stop () { forget(); await stop() }
  }
}

module.exports = { startPm2, available, version }
